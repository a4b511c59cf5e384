//===- TrainDialect.cpp - train dialect registration ------------*- C++ -*-===//

#include "accrue/Dialect/Train/IR/Train.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Transforms/InliningUtils.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace accrue::train;

#include "accrue/Dialect/Train/IR/TrainInterfaces.cpp.inc"
#include "accrue/Dialect/Train/IR/TrainOpsDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "accrue/Dialect/Train/IR/TrainAttrs.cpp.inc"

namespace {
/// The gradient functions train-autodiff generates are inlined into their
/// callers; of the train ops, only the barriers of recomputed values are in
/// them.
struct TrainInlinerInterface : public DialectInlinerInterface {
  using DialectInlinerInterface::DialectInlinerInterface;
  bool isLegalToInline(Operation *op, Region *, bool, IRMapping &) const final {
    return isa<RecomputeBarrierOp>(op);
  }
};
} // namespace

void TrainDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "accrue/Dialect/Train/IR/TrainOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "accrue/Dialect/Train/IR/TrainAttrs.cpp.inc"
      >();
  addInterfaces<TrainInlinerInterface>();
}

int64_t accrue::train::getNumElements(Type type) {
  return cast<ShapedType>(type).getNumElements();
}

std::optional<AccrueArgRole> accrue::train::getArgRole(FunctionOpInterface func,
                                                       unsigned index) {
  auto role = func.getArgAttrOfType<ArgRoleAttr>(index, StepAttrs::kRole);
  // A finalized step records its roles in train.abi.
  if (auto abi = func->getAttrOfType<ArrayAttr>(StepAttrs::kABI);
      !role && abi && index < abi.size())
    if (auto entry = dyn_cast<DictionaryAttr>(abi[index]))
      role = entry.getAs<ArgRoleAttr>(StepAttrs::kRole);
  if (!role)
    return std::nullopt;
  return role.getValue();
}

std::optional<BlockArgument>
accrue::train::getArgWithRole(FunctionOpInterface func, AccrueArgRole role) {
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
    if (getArgRole(func, i) == role)
      return func.getArgument(i);
  return std::nullopt;
}

FailureOr<BlockArgument>
accrue::train::appendStepArgument(FunctionOpInterface step, Type type,
                                  AccrueArgRole role, StringRef name) {
  MLIRContext *ctx = step.getContext();
  unsigned index = step.getNumArguments();
  DictionaryAttr attrs = getArgRoleAttrs(ctx, role, name);
  auto abi = step->getAttrOfType<ArrayAttr>(StepAttrs::kABI);
  if (failed(step.insertArgument(
          index, type, abi ? DictionaryAttr::get(ctx) : attrs, step.getLoc())))
    return failure();
  if (abi) {
    SmallVector<Attribute> entries(abi.begin(), abi.end());
    entries.push_back(attrs);
    step->setAttr(StepAttrs::kABI, ArrayAttr::get(ctx, entries));
  }
  return step.getArgument(index);
}

DictionaryAttr accrue::train::getArgRoleAttrs(MLIRContext *context,
                                              AccrueArgRole role,
                                              StringRef name) {
  Builder b(context);
  return b.getDictionaryAttr(
      {b.getNamedAttr(StepAttrs::kRole, ArgRoleAttr::get(context, role)),
       b.getNamedAttr(StepAttrs::kName, b.getStringAttr(name))});
}
