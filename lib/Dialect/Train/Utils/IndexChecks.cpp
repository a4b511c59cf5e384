//===- IndexChecks.cpp - the ranges of integer batch inputs -----*- C++ -*-===//

#include "accrue/Dialect/Train/Utils/IndexChecks.h"

#include "accrue/Dialect/NN/IR/NN.h"
#include "accrue/Dialect/Train/IR/Train.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace accrue;
using namespace accrue::train;

namespace {

/// The ONNX node an op came from, as messages name it.
std::string nodeName(Operation *op, StringRef kind) {
  std::string text = kind.str();
  if (std::optional<std::string> name = nn::getNodeName(op->getLoc()))
    text += " node '" + *name + "'";
  return text;
}

/// Whether `cast` keeps every integer value it reads (no narrowing, no
/// conversion to another kind).
bool keepsValues(nn::CastOp cast) {
  auto from = dyn_cast<IntegerType>(getElementTypeOrSelf(cast.getInput()));
  auto to = dyn_cast<IntegerType>(getElementTypeOrSelf(cast.getType()));
  return from && to && to.getWidth() >= from.getWidth() && to.getWidth() > 1;
}

/// The dimension `dim` of `value`'s static shape, if it has one.
std::optional<int64_t> staticDim(Value value, int64_t dim) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || dim < 0 || dim >= type.getRank() || type.isDynamicDim(dim))
    return std::nullopt;
  return type.getDimSize(dim);
}

class CheckCollector {
public:
  explicit CheckCollector(Builder &b) : b(b) {}

  /// The checks on the values that reach `root`.
  ArrayAttr collect(Value root) {
    SmallVector<Value> work = {root};
    llvm::SmallPtrSet<void *, 16> seen;
    while (!work.empty()) {
      Value value = work.pop_back_val();
      if (!seen.insert(value.getAsOpaquePointer()).second)
        continue;
      for (OpOperand &use : value.getUses())
        visit(use, work);
    }
    if (checks.empty())
      return {};
    return b.getArrayAttr(checks.takeVector());
  }

private:
  void visit(OpOperand &use, SmallVectorImpl<Value> &work) {
    Operation *user = use.getOwner();
    unsigned operand = use.getOperandNumber();
    llvm::TypeSwitch<Operation *>(user)
        .Case<nn::ReshapeOp, nn::FlattenOp, nn::TransposeOp, nn::ExpandOp,
              nn::ConcatOp, nn::IdentityOp>([&](Operation *op) {
          // Reshape's and Expand's shape operands are not data.
          if (operand == 0 || isa<nn::ConcatOp>(op))
            work.push_back(op->getResult(0));
        })
        .Case([&](nn::CastOp cast) {
          if (keepsValues(cast))
            work.push_back(cast.getResult());
        })
        .Case([&](nn::GatherOp gather) {
          if (operand == 1)
            addRows(gather, gather.getData(),
                    static_cast<int64_t>(gather.getAxis()), "Gather");
        })
        .Case([&](nn::GatherElementsOp gather) {
          if (operand == 1)
            addRows(gather, gather.getData(),
                    static_cast<int64_t>(gather.getAxis()), "GatherElements");
        })
        .Case([&](nn::SoftmaxCrossEntropyLossOp loss) {
          if (operand == 1)
            addClasses(loss, loss.getScores(), loss.getIgnoreIndex(),
                       "SoftmaxCrossEntropyLoss");
        })
        .Case([&](nn::NegativeLogLikelihoodLossOp loss) {
          if (operand == 1)
            addClasses(loss, loss.getInput(), loss.getIgnoreIndex(),
                       "NegativeLogLikelihoodLoss");
        });
  }

  /// Indices into `extent` rows: ONNX counts negative ones from the end.
  void addRows(Operation *op, Value data, int64_t axis, StringRef kind) {
    if (axis < 0)
      if (auto type = dyn_cast<RankedTensorType>(data.getType()))
        axis += type.getRank();
    if (std::optional<int64_t> extent = staticDim(data, axis))
      add(-*extent, *extent, std::nullopt,
          "the " + std::to_string(*extent) + " rows of " + nodeName(op, kind));
  }

  void addClasses(Operation *op, Value scores,
                  std::optional<uint64_t> ignoreIndex, StringRef kind) {
    std::optional<int64_t> ignore;
    if (ignoreIndex)
      ignore = static_cast<int64_t>(*ignoreIndex);
    if (std::optional<int64_t> classes = staticDim(scores, 1))
      add(0, *classes, ignore,
          "the " + std::to_string(*classes) + " classes of " +
              nodeName(op, kind));
  }

  void add(int64_t low, int64_t high, std::optional<int64_t> ignore,
           const std::string &what) {
    NamedAttrList check;
    check.append("low", b.getI64IntegerAttr(low));
    check.append("high", b.getI64IntegerAttr(high));
    if (ignore)
      check.append("ignore", b.getI64IntegerAttr(*ignore));
    check.append("what", b.getStringAttr(what));
    checks.insert(check.getDictionary(b.getContext()));
  }

  Builder &b;
  llvm::SetVector<Attribute> checks;
};

} // namespace

void train::annotateIndexChecks(func::FuncOp forward) {
  Builder b(forward.getContext());
  for (BlockArgument arg : forward.getArguments()) {
    if (getArgRole(forward, arg.getArgNumber()) != ACCRUE_ROLE_BATCH)
      continue;
    auto element = dyn_cast<IntegerType>(getElementTypeOrSelf(arg.getType()));
    if (!element || element.getWidth() == 1)
      continue;
    if (ArrayAttr checks = CheckCollector(b).collect(arg))
      forward.setArgAttr(arg.getArgNumber(), StepAttrs::kIndexChecks, checks);
  }
}
