//===- BiasGradients.cpp - bias gradients as GEMM epilogues -----*- C++ -*-===//

#include "BiasGradients.h"

#include "accrue/Codegen/Common/Contractions.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace accrue;
using namespace accrue::cuda;

namespace {

/// A tensor's values as those of an earlier tensor, `root`, holding the
/// same values: for each of the tensor's dimensions, the root's dimensions
/// it spans (merged by a collapse_shape, row-major).
struct Source {
  Value root;
  SmallVector<SmallVector<int64_t>> dims;
};

/// Whether every element of f32 `value` is a widened value of type
/// `narrow`: the generic computing it yields an arith.extf from `narrow`.
bool holdsWidened(Value value, Type narrow) {
  auto result = dyn_cast<OpResult>(value);
  auto generic =
      result ? dyn_cast<linalg::GenericOp>(result.getOwner()) : nullptr;
  if (!generic)
    return false;
  Value yielded = generic.getRegion().front().getTerminator()->getOperand(
      result.getResultNumber());
  auto ext = yielded.getDefiningOp<arith::ExtFOp>();
  return ext && ext.getIn().getType() == narrow;
}

/// `value`'s source, through collapse_shapes, widenings (bf16 to f32 holds
/// the same values) and roundings of widened values (exact); `value`
/// itself is a ranked tensor, and so is every source.
Source sourceOf(Value value) {
  Source source{value, {}};
  for (int64_t j = 0, e = cast<RankedTensorType>(value.getType()).getRank();
       j < e; ++j)
    source.dims.push_back({j});
  while (true) {
    if (auto collapse = source.root.getDefiningOp<tensor::CollapseShapeOp>()) {
      SmallVector<ReassociationIndices> merged =
          collapse.getReassociationIndices();
      for (SmallVector<int64_t> &dims : source.dims) {
        SmallVector<int64_t> spanned;
        for (int64_t dim : dims)
          llvm::append_range(spanned, merged[dim]);
        dims = spanned;
      }
      source.root = collapse.getSrc();
      continue;
    }
    if (Value narrow = codegen::widenedFrom(source.root);
        narrow && isa<RankedTensorType>(narrow.getType())) {
      source.root = narrow;
      continue;
    }
    if (auto generic = source.root.getDefiningOp<linalg::GenericOp>())
      if (auto trunc =
              dyn_cast_or_null<arith::TruncFOp>(codegen::onlyOpOf(generic)))
        if (holdsWidened(generic.getDpsInputs()[0], trunc.getType())) {
          source.root = generic.getDpsInputs()[0];
          continue;
        }
    return source;
  }
}

/// For each dimension of `source.root` (the source of `operand` of `op`),
/// the loop of `op` indexing it (-1: a unit dimension indexed by 0);
/// nullopt where a loop indexes two dimensions of the operand, or a
/// constant one that is not of unit size.
std::optional<SmallVector<int64_t>>
rootLoops(linalg::GenericOp op, OpOperand &operand, const Source &source) {
  std::optional<SmallVector<int64_t>> loops =
      codegen::loopsOf(op.getMatchingIndexingMap(&operand));
  if (!loops)
    return std::nullopt;
  auto rootType = cast<RankedTensorType>(source.root.getType());
  SmallVector<int64_t> result(rootType.getRank(), -2);
  llvm::SmallDenseSet<int64_t> seen;
  for (auto [dim, loop] : llvm::enumerate(*loops)) {
    if (loop >= 0 && !seen.insert(loop).second)
      return std::nullopt; // a diagonal
    for (int64_t rootDim : source.dims[dim]) {
      if (loop < 0 && rootType.getDimSize(rootDim) != 1)
        return std::nullopt;
      result[rootDim] = loop;
    }
  }
  if (llvm::is_contained(result, -2))
    return std::nullopt;
  return result;
}

/// `op` as a column sum: one input, out[j] = 0 + x summed over every loop
/// but j's (x the input or its widening), f32, into a zero fill. Returns
/// the loop j.
std::optional<int64_t> columnSum(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 1 || op.getNumDpsInits() != 1 ||
      !op.hasPureTensorSemantics() || op->hasAttr(kBiasGradientAttr) ||
      op.getNumReductionLoops() == 0 ||
      !isa<RankedTensorType>(op.getDpsInputs()[0].getType()))
    return std::nullopt;
  auto outType = dyn_cast<RankedTensorType>(op.getDpsInits()[0].getType());
  if (!outType || !outType.getElementType().isF32() ||
      !outType.hasStaticShape())
    return std::nullopt;
  // From zeros.
  auto fill = op.getDpsInits()[0].getDefiningOp<linalg::FillOp>();
  if (!fill || !matchPattern(fill.getInputs()[0], m_AnyZeroFloat()))
    return std::nullopt;
  // yield out + x (either order), x the input or its arith.extf.
  Block &body = op.getRegion().front();
  Value in = body.getArgument(0), out = body.getArgument(1);
  auto add = body.getTerminator()->getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add || !llvm::is_contained(add->getOperands(), out))
    return std::nullopt;
  Value x = add.getLhs() == out ? add.getRhs() : add.getLhs();
  size_t ops = 2;
  if (auto ext = x.getDefiningOp<arith::ExtFOp>()) {
    x = ext.getIn();
    ops = 3;
  }
  if (x != in || body.getOperations().size() != ops)
    return std::nullopt;
  // One loop kept: the output's one dimension of more than one element.
  std::optional<SmallVector<int64_t>> outLoops =
      codegen::loopsOf(op.getIndexingMapsArray()[1]);
  if (!outLoops)
    return std::nullopt;
  std::optional<int64_t> kept;
  for (auto [dim, loop] : llvm::enumerate(*outLoops)) {
    if (loop < 0)
      continue;
    if (kept || outType.getDimSize(dim) == 1)
      return std::nullopt;
    kept = loop;
  }
  auto iterators = op.getIteratorTypesArray();
  for (auto [loop, iterator] : llvm::enumerate(iterators))
    if ((iterator == utils::IteratorType::parallel) != (int64_t(loop) == kept))
      return std::nullopt;
  return kept;
}

/// Whether a column sum keeping loop `kept`, reading `sumSource` with
/// `sumLoops`, is the bias gradient of `contraction`'s input `x`.
bool isBiasGradientOf(int64_t kept, const Source &sumSource,
                      ArrayRef<int64_t> sumLoops, linalg::GenericOp contraction,
                      unsigned x, unsigned other) {
  Source source = sourceOf(contraction.getDpsInputs()[x]);
  if (source.root != sumSource.root)
    return false;
  std::optional<SmallVector<int64_t>> loops =
      rootLoops(contraction, contraction->getOpOperand(x), source);
  if (!loops)
    return false;
  SmallVector<AffineMap> maps = contraction.getIndexingMapsArray();
  auto indexes = [&](unsigned operand, int64_t loop) {
    return maps[operand].isFunctionOfDim(loop);
  };
  auto iterators = contraction.getIteratorTypesArray();
  unsigned out = contraction.getNumDpsInputs();
  // No batch loop; one loop of `x` in the output (its N, or M).
  int64_t outputLoops = 0;
  for (int64_t loop = 0, e = contraction.getNumLoops(); loop < e; ++loop) {
    if (indexes(x, loop) && indexes(other, loop) && indexes(out, loop))
      return false;
    if (indexes(x, loop) && indexes(out, loop))
      ++outputLoops;
    if (iterators[loop] == utils::IteratorType::reduction && !indexes(x, loop))
      return false;
  }
  if (outputLoops != 1)
    return false;
  auto rootType = cast<RankedTensorType>(source.root.getType());
  for (int64_t dim = 0, e = rootType.getRank(); dim < e; ++dim) {
    if (rootType.getDimSize(dim) == 1)
      continue;
    int64_t loop = (*loops)[dim], sumLoop = sumLoops[dim];
    if (loop < 0 || sumLoop < 0)
      return false;
    bool summed = iterators[loop] == utils::IteratorType::reduction &&
                  indexes(other, loop) && !indexes(out, loop);
    bool keptHere = iterators[loop] == utils::IteratorType::parallel &&
                    indexes(out, loop) && !indexes(other, loop);
    if (sumLoop == kept ? !keptHere : !summed)
      return false;
  }
  return true;
}

} // namespace

llvm::DenseSet<Operation *> accrue::cuda::markBiasGradients(Operation *root) {
  SmallVector<linalg::GenericOp> sums, contractions;
  root->walk([&](linalg::GenericOp op) {
    if (op->getParentOfType<linalg::LinalgOp>())
      return;
    if (codegen::matchContraction(op)) {
      if (op.hasPureTensorSemantics())
        contractions.push_back(op);
    } else if (columnSum(op)) {
      sums.push_back(op);
    }
  });
  // Numbers after those of pairs already marked (the pass may run twice).
  int64_t number = 0;
  root->walk([&](linalg::GenericOp op) {
    if (auto pair = op->getAttrOfType<IntegerAttr>(kBiasGradientAttr))
      number = std::max(number, pair.getInt() + 1);
  });
  llvm::DenseSet<Operation *> marked;
  Builder b(root->getContext());
  for (linalg::GenericOp sum : sums) {
    int64_t kept = *columnSum(sum);
    Source source = sourceOf(sum.getDpsInputs()[0]);
    std::optional<SmallVector<int64_t>> loops =
        rootLoops(sum, sum->getOpOperand(0), source);
    if (!loops)
      continue;
    for (linalg::GenericOp contraction : contractions) {
      if (contraction->getBlock() != sum->getBlock() ||
          contraction->hasAttr(kBiasGradientAttr))
        continue;
      codegen::Contraction c = *codegen::matchContraction(contraction);
      std::optional<unsigned> input;
      if (isBiasGradientOf(kept, source, *loops, contraction, c.lhs, c.rhs))
        input = c.lhs;
      else if (isBiasGradientOf(kept, source, *loops, contraction, c.rhs,
                                c.lhs))
        input = c.rhs;
      if (!input)
        continue;
      sum->setAttr(kBiasGradientAttr, b.getI64IntegerAttr(number));
      contraction->setAttr(kBiasGradientAttr,
                           b.getDenseI64ArrayAttr({number, int64_t(*input)}));
      ++number;
      marked.insert(sum);
      break;
    }
  }
  return marked;
}
