//===- NNDialect.cpp - nn dialect registration ------------------*- C++ -*-===//

#include "accrue/Dialect/NN/IR/NN.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Transforms/InliningUtils.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace accrue::nn;

#include "accrue/Dialect/NN/IR/NNEnums.cpp.inc"
#include "accrue/Dialect/NN/IR/NNInterfaces.cpp.inc"
#include "accrue/Dialect/NN/IR/NNOpsDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "accrue/Dialect/NN/IR/NNAttrs.cpp.inc"

namespace {
/// Every nn op is pure and region-free: calls into functions made of nn ops
/// (the generated gradient functions) can always be inlined.
struct NNInlinerInterface : public DialectInlinerInterface {
  using DialectInlinerInterface::DialectInlinerInterface;
  bool isLegalToInline(Operation *, Operation *, bool) const final {
    return true;
  }
  bool isLegalToInline(Operation *, Region *, bool, IRMapping &) const final {
    return true;
  }
  bool isLegalToInline(Region *, Region *, bool, IRMapping &) const final {
    return true;
  }
};
} // namespace

void NNDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "accrue/Dialect/NN/IR/NNOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "accrue/Dialect/NN/IR/NNAttrs.cpp.inc"
      >();
  addInterfaces<NNInlinerInterface>();
}

Operation *NNDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                          Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}

std::optional<std::string> accrue::nn::getNodeName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (std::optional<std::string> name = getNodeName(inner))
        return name;
  if (auto callSite = dyn_cast<CallSiteLoc>(loc))
    return getNodeName(callSite.getCallee());
  return std::nullopt;
}
