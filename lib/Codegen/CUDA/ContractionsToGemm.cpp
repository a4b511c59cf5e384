//===- ContractionsToGemm.cpp - contractions as runtime GEMMs ---*- C++ -*-===//
//
// Each contraction of a step (after bufferization) whose operands a strided
// batched GEMM can read becomes a call of the runtime's GEMM entry
// (ACCRUE_GEMM_FUNCTION, cuBLASLt on the GPU). The contraction's loops are
// sorted into the GEMM's batch, M, N and K dimensions; several loops of one
// kind collapse into one when every operand lays them out contiguously
// (a Linear's [batch, sequence] rows, attention's [batch, heads]); an
// input that alone keeps the batch loops apart is copied into a compact
// buffer first, so that one call takes the whole batch.
//
// A contraction that starts from zeros gets beta = 0 (its zero fill goes).
// One whose result is only added into the gradient accumulator writes into
// the accumulator instead: beta = 0 on the first micro-batch and 1 after
// when it is the only writer of its part of the accumulator in the loop,
// else beta = 1 (the accumulator holds zeros when a step starts). No
// temporary, no separate add.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/Common/Contractions.h"

#include "accrue/Codegen/CUDA/Passes.h"
#include "accrue/Dialect/Train/IR/Train.h"

#include "accrue-runtime/StepABI.h"

#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include <limits>

namespace accrue::cuda {
#define GEN_PASS_DEF_CUDACONTRACTIONSTOGEMM
#include "accrue/Codegen/CUDA/Passes.h.inc"
} // namespace accrue::cuda

using namespace mlir;
using namespace accrue;
using namespace accrue::cuda;
using namespace accrue::codegen;

namespace {

//===----------------------------------------------------------------------===//
// Views of the gradient accumulator
//===----------------------------------------------------------------------===//

/// The buffer `view` is a view of (a function argument or an allocation),
/// and the elements of it the view covers ([begin, end) of a rank-1
/// buffer) when known.
struct ViewRoot {
  Value base;
  std::optional<std::pair<int64_t, int64_t>> range;
};

std::optional<ViewRoot> rootOf(Value view) {
  std::optional<std::pair<int64_t, int64_t>> range;
  bool known = true;
  while (true) {
    if (auto arg = dyn_cast<BlockArgument>(view)) {
      if (!isa<FunctionOpInterface>(arg.getOwner()->getParentOp()))
        return std::nullopt;
      return ViewRoot{arg, known ? range : std::nullopt};
    }
    Operation *op = view.getDefiningOp();
    if (isa_and_nonnull<memref::AllocOp, memref::AllocaOp, memref::GetGlobalOp>(
            op))
      return ViewRoot{view, known ? range : std::nullopt};
    if (auto subview = dyn_cast_or_null<memref::SubViewOp>(op)) {
      // A contiguous slice of a rank-1 buffer: its element range.
      if (subview.getSourceType().getRank() == 1 &&
          subview.getType().getRank() == 1 &&
          !ShapedType::isDynamic(subview.getStaticOffsets()[0]) &&
          !ShapedType::isDynamic(subview.getStaticSizes()[0]) &&
          subview.getStaticStrides()[0] == 1 && !range) {
        int64_t begin = subview.getStaticOffsets()[0];
        range = std::make_pair(begin, begin + subview.getStaticSizes()[0]);
      } else {
        known = false;
      }
      view = subview.getSource();
      continue;
    }
    if (isa_and_nonnull<memref::ExpandShapeOp, memref::CollapseShapeOp,
                        memref::CastOp>(op)) {
      view = op->getOperand(0);
      continue;
    }
    if (auto viewLike = dyn_cast_or_null<ViewLikeOpInterface>(op)) {
      known = false;
      view = viewLike.getViewSource();
      continue;
    }
    return std::nullopt;
  }
}

/// `view`, usable right before `user`: the view ops after it that build
/// `view` from values defined before it are moved before it.
LogicalResult hoistViewBefore(Value view, Operation *user) {
  Operation *op = view.getDefiningOp();
  if (!op || op->getBlock() != user->getBlock() || op->isBeforeInBlock(user))
    return success();
  if (!isa<ViewLikeOpInterface, memref::ExpandShapeOp, memref::CollapseShapeOp>(
          op) ||
      !isMemoryEffectFree(op))
    return failure();
  for (Value operand : op->getOperands())
    if (failed(hoistViewBefore(operand, user)))
      return failure();
  op->moveBefore(user);
  return success();
}

bool overlaps(const ViewRoot &a, const ViewRoot &b) {
  if (a.base != b.base)
    return false;
  if (!a.range || !b.range)
    return true;
  return a.range->first < b.range->second && b.range->first < a.range->second;
}

/// Whether buffer `memref` may share memory with `region` (it does when
/// its root cannot be told).
bool mayOverlap(Value memref, const ViewRoot &region) {
  std::optional<ViewRoot> root = rootOf(memref);
  return !root || overlaps(*root, region);
}

/// Whether an op other than those in `skip`, nested in `scope`, uses
/// memory overlapping `region` (views themselves do not count).
bool touchedElsewhere(Operation *scope, const ViewRoot &region,
                      ArrayRef<Operation *> skip) {
  WalkResult result = scope->walk([&](Operation *op) {
    if (llvm::is_contained(skip, op) || isa<ViewLikeOpInterface>(op) ||
        isa<memref::DimOp, memref::ExtractStridedMetadataOp>(op))
      return WalkResult::advance();
    for (Value operand : op->getOperands())
      if (isa<BaseMemRefType>(operand.getType()) && mayOverlap(operand, region))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return result.wasInterrupted();
}

/// How a contraction's output starts.
enum class Start {
  Given,       // its current contents (beta = 1)
  Zero,        // zeros (beta = 0)
  Accumulator, // the accumulator: beta = 0 on the first micro-batch
};

/// The zero fill of `op`'s output before it in its block, with nothing
/// between them using that buffer; null if there is none.
linalg::FillOp zeroFillBefore(linalg::GenericOp op) {
  Value out = op.getDpsInits()[0];
  std::optional<ViewRoot> root = rootOf(out);
  if (!root)
    return nullptr;
  for (Operation *prev = op->getPrevNode(); prev; prev = prev->getPrevNode()) {
    auto fill = dyn_cast<linalg::FillOp>(prev);
    if (fill && fill.getDpsInits()[0] == out)
      return matchPattern(fill.getInputs()[0], m_AnyZeroFloat()) ? fill
                                                                 : nullptr;
    if (touchedElsewhere(prev, *root, {}))
      return nullptr;
  }
  return nullptr;
}

/// The reshape `op` (memref.expand_shape or collapse_shape) applied to
/// `source`, or undone if `inverse`.
Value reshapeLike(OpBuilder &b, Location loc, Value source, Operation *op,
                  bool inverse) {
  if (auto expand = dyn_cast<memref::ExpandShapeOp>(op)) {
    if (inverse)
      return memref::CollapseShapeOp::create(b, loc, source,
                                             expand.getReassociationIndices());
    return memref::ExpandShapeOp::create(
        b, loc, expand.getResultType().getShape(), source,
        expand.getReassociationIndices());
  }
  auto collapse = cast<memref::CollapseShapeOp>(op);
  if (inverse)
    return memref::ExpandShapeOp::create(
        b, loc, collapse.getSrcType().getShape(), source,
        collapse.getReassociationIndices());
  return memref::CollapseShapeOp::create(b, loc, source,
                                         collapse.getReassociationIndices());
}

/// `value`'s reshape (expand_shape or collapse_shape), if it is one.
Operation *reshapeOf(Value value) {
  Operation *op = value.getDefiningOp();
  return isa_and_nonnull<memref::ExpandShapeOp, memref::CollapseShapeOp>(op)
             ? op
             : nullptr;
}

/// `temp = 0; temp += a * b; acc_view += temp` with `temp` used nowhere
/// else becomes `acc_view += a * b` (the contraction and the add may see
/// `temp` through reshapes that add or drop unit dimensions). Returns
/// whether it did, and whether the contraction is then the only writer of
/// its part of the accumulator in the micro-batch loop.
std::optional<bool> foldIntoAccumulator(linalg::GenericOp op,
                                        func::FuncOp step) {
  linalg::FillOp fill = zeroFillBefore(op);
  if (!fill)
    return std::nullopt;
  Value out = op.getDpsInits()[0];
  Operation *written = reshapeOf(out);
  Value temp = written ? written->getOperand(0) : out;
  if (!temp.getDefiningOp<memref::AllocOp>())
    return std::nullopt;
  // Every use of `temp`: the contraction and its fill (maybe through a
  // reshape), then the add (maybe through another).
  linalg::GenericOp add;
  Operation *read = nullptr;
  auto isAdd = [&](Operation *user, Value input) {
    auto generic = dyn_cast<linalg::GenericOp>(user);
    if (add || !generic || generic.getNumDpsInputs() != 1 ||
        generic.getNumDpsInits() != 1 || generic.getDpsInputs()[0] != input)
      return false;
    add = generic;
    return true;
  };
  for (Operation *user : temp.getUsers()) {
    if (user == written) {
      if (!llvm::all_of(out.getUsers(), [&](Operation *outUser) {
            return outUser == fill || outUser == op;
          }))
        return std::nullopt;
      continue;
    }
    if (user == fill || user == op || isAdd(user, temp))
      continue;
    if (user->getNumResults() != 1)
      return std::nullopt;
    Operation *reshape = reshapeOf(user->getResult(0));
    if (read || !reshape || !user->getResult(0).hasOneUse() ||
        !isAdd(*user->getUsers().begin(), user->getResult(0)))
      return std::nullopt;
    read = reshape;
  }
  if (!add || add->getBlock() != op->getBlock() || add->isBeforeInBlock(op) ||
      !llvm::all_of(add.getIndexingMapsArray(),
                    [](AffineMap map) { return map.isIdentity(); }))
    return std::nullopt;
  Block &body = add.getRegion().front();
  auto sum = body.getTerminator()->getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!sum || &body.front() != sum.getOperation() ||
      !llvm::is_contained(sum->getOperands(), body.getArgument(0)) ||
      !llvm::is_contained(sum->getOperands(), body.getArgument(1)))
    return std::nullopt;
  Value view = add.getDpsInits()[0];
  std::optional<ViewRoot> region = rootOf(view);
  if (!region)
    return std::nullopt;
  auto argument = dyn_cast<BlockArgument>(region->base);
  if (!argument || train::getArgRole(step, argument.getArgNumber()) !=
                       ACCRUE_ROLE_ACCUMULATOR)
    return std::nullopt;
  // Nothing between the contraction and the add may use that part of the
  // accumulator: the contraction now writes it where it stands.
  for (Operation *between = op->getNextNode(); between != add;
       between = between->getNextNode())
    if (touchedElsewhere(between, *region, {}))
      return std::nullopt;
  auto loop = dyn_cast<scf::ForOp>(op->getParentOp());
  bool onlyWriter =
      loop && loop->hasAttr(train::StepAttrs::kMicrobatchLoop) &&
      !touchedElsewhere(loop, *region, {fill, op, add, written, read});
  if (failed(hoistViewBefore(view, op)))
    return std::nullopt;
  // The accumulator's view, shaped as the contraction's output.
  OpBuilder b(op);
  if (read)
    view = reshapeLike(b, op.getLoc(), view, read, /*inverse=*/true);
  if (written)
    view = reshapeLike(b, op.getLoc(), view, written, /*inverse=*/false);
  if (cast<MemRefType>(view.getType()).getShape() !=
      cast<MemRefType>(out.getType()).getShape())
    return std::nullopt;
  op.getDpsInitsMutable()[0].set(view);
  add.erase();
  fill.erase();
  for (Operation *reshape : {read, written})
    if (reshape)
      reshape->erase();
  return onlyWriter;
}

//===----------------------------------------------------------------------===//
// GEMM plans
//===----------------------------------------------------------------------===//

enum Kind { Batch, M, N, K, NumKinds };
enum OperandIndex { A, B, C };

/// A contraction as a GEMM: for each of A, B, C its buffer, the position of
/// each loop in its dimensions (-1: absent) and its strides; for each
/// kind, its loops, outermost first.
struct Plan {
  Value buffers[3];
  SmallVector<int64_t> position[3];
  SmallVector<int64_t> strides[3];
  SmallVector<int64_t> loops[NumKinds];
  /// Batch loops that do not collapse with the GEMM's batch dimension,
  /// run by the host around the call.
  SmallVector<int64_t> hostLoops;
  /// Whether the K loops do not collapse into one dimension: the plan is
  /// usable only once the inputs are copied so that they do.
  bool splitReduction = false;
  SmallVector<int64_t> ranges;
  AccrueDType inputType = ACCRUE_DTYPE_FLOAT32;
  /// C's: f32, or the bf16 or f16 a zero-started GEMM rounds its sum to.
  AccrueDType outputType = ACCRUE_DTYPE_FLOAT32;
};

std::optional<AccrueDType> gemmType(Type type) {
  if (type.isF32())
    return ACCRUE_DTYPE_FLOAT32;
  if (type.isBF16())
    return ACCRUE_DTYPE_BFLOAT16;
  if (type.isF16())
    return ACCRUE_DTYPE_FLOAT16;
  return std::nullopt;
}

/// Whether loop `outer` is laid out right outside loop `inner` in every
/// operand of `plan` that has them (but those in the bit mask `ignored`,
/// bit x for operand x): the two collapse into one dimension. An operand
/// that has one of them but not the other (a batch loop only the output
/// and one input have) does not collapse them.
bool collapsible(const Plan &plan, int64_t outer, int64_t inner,
                 unsigned ignored = 0) {
  if (ShapedType::isDynamic(plan.ranges[inner]))
    return false;
  for (int x = A; x <= C; ++x) {
    int64_t o = plan.position[x][outer], i = plan.position[x][inner];
    if (ignored & 1u << x || (o < 0 && i < 0))
      continue;
    if (o < 0 || i < 0 ||
        plan.strides[x][o] != plan.strides[x][i] * plan.ranges[inner])
      return false;
  }
  return true;
}

/// `loops` (sorted) split into runs whose neighbours collapse.
SmallVector<SmallVector<int64_t>> collapsingRuns(const Plan &plan,
                                                 ArrayRef<int64_t> loops) {
  SmallVector<SmallVector<int64_t>> runs;
  for (int64_t loop : loops) {
    if (runs.empty() || !collapsible(plan, runs.back().back(), loop))
      runs.emplace_back();
    runs.back().push_back(loop);
  }
  return runs;
}

/// Of `plan`'s batch loops (sorted by C's position), the run of collapsing
/// loops with the most iterations (the innermost of equals; a dynamic
/// extent counts as the most) stays the GEMM's batch dimension; the other
/// runs become host loops around the call.
void chooseBatchRun(Plan &plan) {
  SmallVector<SmallVector<int64_t>> runs =
      collapsingRuns(plan, plan.loops[Batch]);
  auto iterations = [&](ArrayRef<int64_t> run) {
    int64_t product = 1;
    for (int64_t loop : run) {
      if (ShapedType::isDynamic(plan.ranges[loop]) ||
          product > std::numeric_limits<int64_t>::max() / plan.ranges[loop])
        return std::numeric_limits<int64_t>::max();
      product *= plan.ranges[loop];
    }
    return product;
  };
  size_t chosen = runs.empty() ? 0 : runs.size() - 1;
  for (size_t r = runs.size(); r-- > 0;)
    if (iterations(runs[r]) > iterations(runs[chosen]))
      chosen = r;
  plan.loops[Batch].clear();
  for (size_t r = 0; r < runs.size(); ++r)
    llvm::append_range(r == chosen ? plan.loops[Batch] : plan.hostLoops,
                       runs[r]);
}

/// Sorts `plan`'s loops of each kind into the GEMM's dimensions: loops of
/// one iteration go (they add nothing to any address) unless their kind
/// has no other; of M's and N's loops, the innermost that collapse are the
/// dimension and the loops outside them batch loops that one input does
/// not have (a convolution's samples for its weight: batch stride 0); K's
/// must collapse (else splitReduction: compactReductionInputs copies the
/// inputs so that they do); then chooseBatchRun.
void collapseLoops(Plan &plan) {
  for (SmallVector<int64_t> &loops : plan.loops)
    if (llvm::any_of(loops,
                     [&](int64_t loop) { return plan.ranges[loop] != 1; }))
      llvm::erase_if(loops,
                     [&](int64_t loop) { return plan.ranges[loop] == 1; });
  auto byPosition = [&](OperandIndex x) {
    return [&plan, x](int64_t l, int64_t r) {
      return plan.position[x][l] < plan.position[x][r];
    };
  };
  for (int kind : {M, N}) {
    SmallVector<int64_t> &loops = plan.loops[kind];
    if (loops.empty())
      continue;
    llvm::sort(loops, byPosition(C));
    SmallVector<SmallVector<int64_t>> runs = collapsingRuns(plan, loops);
    loops = runs.pop_back_val();
    for (ArrayRef<int64_t> run : runs)
      llvm::append_range(plan.loops[Batch], run);
  }
  llvm::sort(plan.loops[K], byPosition(A));
  if (collapsingRuns(plan, plan.loops[K]).size() > 1)
    plan.splitReduction = true;
  llvm::sort(plan.loops[Batch], byPosition(C));
  chooseBatchRun(plan);
}

FailureOr<Plan> planGemm(linalg::GenericOp op, const Contraction &c) {
  Plan plan;
  plan.buffers[A] = op.getDpsInputs()[c.lhs];
  plan.buffers[B] = op.getDpsInputs()[c.rhs];
  plan.buffers[C] = op.getDpsInits()[0];
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  AffineMap operandMaps[3] = {maps[c.lhs], maps[c.rhs], maps[2]};
  int64_t numLoops = op.getNumLoops();
  plan.ranges = op.getStaticLoopRanges();
  for (int x = A; x <= C; ++x) {
    auto type = cast<MemRefType>(plan.buffers[x].getType());
    int64_t offset;
    if (failed(type.getStridesAndOffset(plan.strides[x], offset)))
      return failure();
    plan.position[x].assign(numLoops, -1);
    for (auto [dim, loop] : llvm::enumerate(*loopsOf(operandMaps[x]))) {
      if (loop < 0)
        continue;
      if (plan.position[x][loop] >= 0 ||
          ShapedType::isDynamic(plan.strides[x][dim]))
        return failure(); // a diagonal, or strides known only at run time
      plan.position[x][loop] = dim;
    }
  }
  // Element types: A and B alike, C f32.
  std::optional<AccrueDType> a = gemmType(c.lhsElement),
                             b = gemmType(c.rhsElement);
  if (!a || a != b ||
      !cast<MemRefType>(plan.buffers[C].getType()).getElementType().isF32())
    return failure();
  plan.inputType = *a;
  // Sort the loops by kind.
  auto iterators = op.getIteratorTypesArray();
  for (int64_t loop = 0; loop < numLoops; ++loop) {
    bool inA = plan.position[A][loop] >= 0, inB = plan.position[B][loop] >= 0,
         inC = plan.position[C][loop] >= 0;
    bool parallel = iterators[loop] == utils::IteratorType::parallel;
    Kind kind;
    if (inA && inB && inC && parallel)
      kind = Batch;
    else if (inA && !inB && inC && parallel)
      kind = M;
    else if (!inA && inB && inC && parallel)
      kind = N;
    else if (inA && inB && !inC && !parallel)
      kind = K;
    else
      return failure(); // a broadcast or a reduction of one operand
    plan.loops[kind].push_back(loop);
  }
  if (plan.loops[K].empty())
    return failure();
  collapseLoops(plan);
  // Each matrix needs unit stride along its rows or its columns (or a
  // dimension of size 1).
  auto groupSize = [&](int kind) {
    int64_t size = 1;
    for (int64_t loop : plan.loops[kind])
      size = ShapedType::isDynamic(plan.ranges[loop]) ||
                     ShapedType::isDynamic(size)
                 ? ShapedType::kDynamic
                 : size * plan.ranges[loop];
    return size;
  };
  auto innerStride = [&](int x, int kind) -> int64_t {
    if (plan.loops[kind].empty())
      return 0;
    return plan.strides[x][plan.position[x][plan.loops[kind].back()]];
  };
  std::pair<int, int> matrices[3] = {{M, K}, {K, N}, {M, N}};
  for (int x = A; x <= C; ++x) {
    auto [rows, cols] = matrices[x];
    if (innerStride(x, rows) != 1 && innerStride(x, cols) != 1 &&
        groupSize(rows) != 1 && groupSize(cols) != 1)
      return failure();
  }
  return plan;
}

/// The batch loops of `plan` (the host loops and the GEMM's batch
/// dimension's), in C's order.
SmallVector<int64_t> batchLoops(const Plan &plan) {
  SmallVector<int64_t> loops(plan.hostLoops);
  llvm::append_range(loops, plan.loops[Batch]);
  llvm::sort(loops, [&](int64_t l, int64_t r) {
    return plan.position[C][l] < plan.position[C][r];
  });
  return loops;
}

/// Whether the batch loops collapse into one in every operand but those in
/// the bit mask `ignored`.
bool batchCollapses(const Plan &plan, ArrayRef<int64_t> loops,
                    unsigned ignored) {
  for (size_t i = 0; i + 1 < loops.size(); ++i)
    if (!collapsible(plan, loops[i], loops[i + 1], ignored))
      return false;
  return true;
}

/// Copies the inputs of `op` in `copies` (A or B, with the order of its
/// dimensions in the copy: copy dimension k is the input's `order[k]`) into
/// buffers of their own, and makes `op` read the copies.
void copyInputs(RewriterBase &rewriter, linalg::GenericOp op,
                const Contraction &c, const Plan &plan,
                ArrayRef<std::pair<int, SmallVector<int64_t>>> copies) {
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  rewriter.setInsertionPoint(op);
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  SmallVector<std::pair<unsigned, Value>> operands;
  for (auto &[x, order] : copies) {
    unsigned input = x == A ? c.lhs : c.rhs;
    Value source = plan.buffers[x];
    auto type = cast<MemRefType>(source.getType());
    SmallVector<int64_t> shape;
    for (int64_t d : order)
      shape.push_back(type.getDimSize(d));
    Value compact = memref::AllocOp::create(
        rewriter, loc, MemRefType::get(shape, type.getElementType()));
    // compact[i0, i1, ...] = source[..., i_k at order[k], ...].
    SmallVector<AffineExpr> sourceDims(type.getRank());
    for (auto [k, d] : llvm::enumerate(order))
      sourceDims[d] = getAffineDimExpr(k, ctx);
    int64_t rank = type.getRank();
    linalg::GenericOp::create(
        rewriter, loc, ValueRange{source}, ValueRange{compact},
        {AffineMap::get(rank, 0, sourceDims, ctx),
         AffineMap::getMultiDimIdentityMap(rank, ctx)},
        SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel),
        [](OpBuilder &b, Location l, ValueRange args) {
          linalg::YieldOp::create(b, l, args[0]);
        });
    // The product reads the copy: its map's results in the new order.
    SmallVector<AffineExpr> results;
    for (int64_t d : order)
      results.push_back(maps[input].getResult(d));
    maps[input] = AffineMap::get(maps[input].getNumDims(), 0, results, ctx);
    operands.emplace_back(input, compact);
  }
  rewriter.modifyOpInPlace(op, [&] {
    for (auto [input, compact] : operands)
      op->setOperand(input, compact);
    op.setIndexingMapsAttr(rewriter.getAffineMapArrayAttr(maps));
  });
}

/// The order of input `x`'s dimensions with those of `loops` moved, in
/// that order, to the front (`last`: to the back); empty if `x` does not
/// have them all or its shape is not static.
SmallVector<int64_t> orderWith(const Plan &plan, int x, ArrayRef<int64_t> loops,
                               bool last) {
  auto type = cast<MemRefType>(plan.buffers[x].getType());
  if (!type.hasStaticShape() ||
      llvm::any_of(loops, [&](int64_t l) { return plan.position[x][l] < 0; }))
    return {};
  SmallVector<int64_t> moved, order;
  for (int64_t loop : loops)
    moved.push_back(plan.position[x][loop]);
  if (!last)
    order = moved;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (!llvm::is_contained(moved, d))
      order.push_back(d);
  if (last)
    llvm::append_range(order, moved);
  return order;
}

/// When the batch loops of `op`'s GEMM collapse in its output but not in
/// one or both of its inputs (attention's products reading [batch,
/// sequence, heads, dim] through a transpose: samples and heads in two
/// strides), copies each such input into a buffer of its own with the
/// batch dimensions outermost, in the output's order, and the others after
/// them as they were, so that one strided batched call does what a call
/// per host loop iteration did (a copy kernel instead of 7 more calls for
/// the 10M GPT's 8 samples). Returns whether it did.
bool compactBatchInputs(RewriterBase &rewriter, linalg::GenericOp op,
                        const Contraction &c, const Plan &plan) {
  if (plan.hostLoops.empty())
    return false;
  SmallVector<int64_t> loops = batchLoops(plan);
  if (!batchCollapses(plan, loops, 1u << A | 1u << B))
    return false;
  SmallVector<std::pair<int, SmallVector<int64_t>>> copies;
  for (int x : {A, B}) {
    if (batchCollapses(plan, loops, 0b111u & ~(1u << x)))
      continue;
    // A batch loop the input does not have (its batch stride is 0) cannot
    // be laid out by copying it.
    SmallVector<int64_t> order = orderWith(plan, x, loops, /*last=*/false);
    // The innermost dimension stays innermost (the GEMM's unit stride).
    if (order.empty() ||
        order.back() !=
            cast<MemRefType>(plan.buffers[x].getType()).getRank() - 1)
      return false;
    copies.emplace_back(x, std::move(order));
  }
  copyInputs(rewriter, op, c, plan, copies);
  return true;
}

/// When the K loops of `op`'s GEMM do not collapse in an input (a
/// convolution's weight gradient, summed over samples and output pixels
/// laid out [samples, channels, pixels]), copies each such input into a
/// buffer of its own with the K dimensions innermost, in A's order, so that
/// one call sums over all of them. Returns whether it did.
bool compactReductionInputs(RewriterBase &rewriter, linalg::GenericOp op,
                            const Contraction &c, const Plan &plan) {
  ArrayRef<int64_t> loops = plan.loops[K];
  SmallVector<std::pair<int, SmallVector<int64_t>>> copies;
  for (int x : {A, B}) {
    unsigned others = 0b111u & ~(1u << x);
    bool collapses = true;
    for (size_t i = 0; i + 1 < loops.size(); ++i)
      collapses &= collapsible(plan, loops[i], loops[i + 1], others);
    if (collapses)
      continue;
    SmallVector<int64_t> order = orderWith(plan, x, loops, /*last=*/true);
    if (order.empty())
      return false;
    copies.emplace_back(x, std::move(order));
  }
  copyInputs(rewriter, op, c, plan, copies);
  return true;
}

//===----------------------------------------------------------------------===//
// Operands exact in a narrower precision
//===----------------------------------------------------------------------===//

/// Whether `scope` or an op nested in it may write memory overlapping
/// `region`: a destination-style op through its inits, any other op through
/// its write effects; an op whose effects are unknown may write anything.
bool mayWrite(Operation *scope, const ViewRoot &region) {
  WalkResult result = scope->walk([&](Operation *op) {
    if (auto dps = dyn_cast<DestinationStyleOpInterface>(op)) {
      for (Value init : dps.getDpsInits())
        if (isa<BaseMemRefType>(init.getType()) && mayOverlap(init, region))
          return WalkResult::interrupt();
      return WalkResult::advance();
    }
    auto effects = dyn_cast<MemoryEffectOpInterface>(op);
    if (!effects)
      return op->hasTrait<OpTrait::HasRecursiveMemoryEffects>()
                 ? WalkResult::advance()
                 : WalkResult::interrupt();
    SmallVector<MemoryEffects::EffectInstance> instances;
    effects.getEffects(instances);
    for (const MemoryEffects::EffectInstance &instance : instances) {
      if (!isa<MemoryEffects::Write>(instance.getEffect()))
        continue;
      Value written = instance.getValue();
      if (!written || !isa<BaseMemRefType>(written.getType()) ||
          mayOverlap(written, region))
        return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return result.wasInterrupted();
}

/// Whether `view` is all of `base`: a chain of reshapes and casts of it.
bool isWhole(Value view, Value base) {
  while (view != base) {
    Operation *op = view.getDefiningOp();
    if (!isa_and_nonnull<memref::ExpandShapeOp, memref::CollapseShapeOp,
                         memref::CastOp>(op))
      return false;
    view = op->getOperand(0);
  }
  return true;
}

AccrueDType exactIn(Value operand, Operation *reader);

/// The precision the values `writer` leaves in `operand` (every element
/// `operand` covers) are exact in, given that it is the last op to write
/// any of `region`, `operand`'s memory.
AccrueDType exactAfter(Operation *writer, Value operand,
                       const ViewRoot &region) {
  auto dps = dyn_cast<DestinationStyleOpInterface>(writer);
  if (!dps)
    return ACCRUE_DTYPE_FLOAT32;
  OpOperand *init = nullptr;
  for (OpOperand &candidate : dps.getDpsInitsMutable()) {
    if (mayOverlap(candidate.get(), region)) {
      if (init)
        return ACCRUE_DTYPE_FLOAT32;
      init = &candidate;
    }
  }
  // The writer covers what the reader reads.
  if (!init || (init->get() != operand && !(isWhole(init->get(), region.base) &&
                                            isWhole(operand, region.base))))
    return ACCRUE_DTYPE_FLOAT32;
  // A transpose or a copy moves values as they are.
  if (isa<linalg::TransposeOp, linalg::CopyOp>(writer))
    return exactIn(dps.getDpsInputs().front(), writer);
  auto generic = dyn_cast<linalg::GenericOp>(writer);
  if (!generic)
    return ACCRUE_DTYPE_FLOAT32;
  for (Operation &op : generic.getRegion().front().without_terminator())
    if (mayWrite(&op, region))
      return ACCRUE_DTYPE_FLOAT32;
  Value yielded = generic.getRegion().front().getTerminator()->getOperand(
      init->getOperandNumber() - generic.getNumDpsInputs());
  auto ext = yielded.getDefiningOp<arith::ExtFOp>();
  if (!ext)
    return ACCRUE_DTYPE_FLOAT32;
  return gemmType(ext.getIn().getType()).value_or(ACCRUE_DTYPE_FLOAT32);
}

/// The precision the values `reader` reads through `operand` are exact in:
/// bf16 or f16 if the last op to write them stores widened bf16 or f16
/// values (or moves such values), else f32. The last writer is the nearest
/// op before `reader` that may write any of the operand's memory, walking
/// out of enclosing loops only where nothing in the loop writes it.
AccrueDType exactIn(Value operand, Operation *reader) {
  std::optional<ViewRoot> region = rootOf(operand);
  if (!region)
    return ACCRUE_DTYPE_FLOAT32;
  for (Operation *at = reader;;) {
    for (Operation *op = at->getPrevNode(); op; op = op->getPrevNode())
      if (mayWrite(op, *region))
        return exactAfter(op, operand, *region);
    Operation *parent = at->getParentOp();
    if (!parent || isa<FunctionOpInterface>(parent) ||
        mayWrite(parent, *region))
      return ACCRUE_DTYPE_FLOAT32;
    at = parent;
  }
}

/// The runtime's GEMM entry, declared once.
func::FuncOp gemmFunction(ModuleOp module) {
  if (auto existing = module.lookupSymbol<func::FuncOp>(ACCRUE_GEMM_FUNCTION))
    return existing;
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  Type index = b.getIndexType();
  SmallVector<Type> inputs(17, index);
  inputs.push_back(b.getF32Type());
  auto function = func::FuncOp::create(b, module.getLoc(), ACCRUE_GEMM_FUNCTION,
                                       b.getFunctionType(inputs, {}));
  function.setPrivate();
  return function;
}

/// The rounding of zero-started contraction `op`'s result to bf16 or f16
/// that cuda-fold-into-contractions marked (kGemmRoundingAttr), if the GEMM
/// can write its output instead: `op` writes a buffer of its own (maybe
/// through a reshape) that only the rounding reads, and the rounding writes
/// a buffer of its own, of the same shape, that nothing between the two
/// uses. Returns the rounding and its output as `op` would write it (the
/// allocation moved before `op`, reshaped alike).
std::optional<std::pair<linalg::GenericOp, Value>>
roundingAfter(linalg::GenericOp op) {
  Value out = op.getDpsInits()[0];
  Operation *written = reshapeOf(out);
  Value product = written ? written->getOperand(0) : out;
  if (!product.getDefiningOp<memref::AllocOp>() ||
      (written && !llvm::all_of(out.getUsers(),
                                [&](Operation *user) { return user == op; })))
    return std::nullopt;
  linalg::GenericOp rounding;
  for (Operation *user : product.getUsers()) {
    if (user == op || user == written)
      continue;
    auto generic = dyn_cast<linalg::GenericOp>(user);
    if (!generic || !generic->hasAttr(kGemmRoundingAttr) || rounding ||
        generic.getDpsInputs()[0] != product ||
        generic->getBlock() != op->getBlock() || !op->isBeforeInBlock(generic))
      return std::nullopt;
    rounding = generic;
  }
  if (!rounding)
    return std::nullopt;
  // The rounded values' buffer (bufferization may have given it to earlier
  // ops too): not the GEMM's inputs, and not used between the two.
  Value rounded = rounding.getDpsInits()[0];
  auto alloc = rounded.getDefiningOp<memref::AllocOp>();
  if (!alloc || alloc->getNumOperands() != 0 ||
      cast<MemRefType>(rounded.getType()).getShape() !=
          cast<MemRefType>(product.getType()).getShape())
    return std::nullopt;
  ViewRoot region{rounded, std::nullopt};
  if (llvm::any_of(op.getDpsInputs(),
                   [&](Value input) { return mayOverlap(input, region); }))
    return std::nullopt;
  for (Operation *between = op->getNextNode(); between != rounding;
       between = between->getNextNode())
    if (touchedElsewhere(between, region, {}))
      return std::nullopt;
  if (alloc->getBlock() == op->getBlock() && op->isBeforeInBlock(alloc))
    alloc->moveBefore(op);
  OpBuilder b(op);
  if (written)
    rounded = reshapeLike(b, op.getLoc(), rounded, written, /*inverse=*/false);
  return std::make_pair(rounding, rounded);
}

/// Replaces `op` by a call of the GEMM entry; its f32 inputs hold values
/// exact in `exact` (f32 when nothing narrower).
void emitGemm(linalg::GenericOp op, const Plan &plan, Start start,
              AccrueDType exact, func::FuncOp gemm) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto constant = [&](int64_t value) -> Value {
    return arith::ConstantIndexOp::create(b, loc, value);
  };
  // The size of a loop, read from an operand that has it.
  auto loopSize = [&](int64_t loop) -> Value {
    if (!ShapedType::isDynamic(plan.ranges[loop]))
      return constant(plan.ranges[loop]);
    for (int x = C; x >= A; --x)
      if (plan.position[x][loop] >= 0)
        return memref::DimOp::create(b, loc, plan.buffers[x],
                                     plan.position[x][loop]);
    llvm_unreachable("every loop indexes an operand");
  };
  auto groupSize = [&](int kind) {
    Value size = constant(1);
    for (int64_t loop : plan.loops[kind])
      size = b.createOrFold<arith::MulIOp>(loc, size, loopSize(loop));
    return size;
  };
  auto stride = [&](int x, int kind) {
    if (plan.loops[kind].empty() ||
        plan.position[x][plan.loops[kind].back()] < 0)
      return constant(0);
    return constant(plan.strides[x][plan.position[x][plan.loops[kind].back()]]);
  };
  auto address = [&](int x) {
    Value buffer = plan.buffers[x];
    auto type = cast<MemRefType>(buffer.getType());
    Value offset =
        memref::ExtractStridedMetadataOp::create(b, loc, buffer).getOffset();
    Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
    Value bytes = b.createOrFold<arith::MulIOp>(
        loc, offset, constant(type.getElementTypeBitWidth() / 8));
    return b.createOrFold<arith::AddIOp>(loc, base, bytes);
  };
  int64_t types = int64_t(plan.inputType) | int64_t(plan.outputType) << 8 |
                  int64_t(exact) << 16;
  Value beta;
  switch (start) {
  case Start::Given:
    beta =
        arith::ConstantFloatOp::create(b, loc, b.getF32Type(), APFloat(1.0f));
    break;
  case Start::Zero:
    beta =
        arith::ConstantFloatOp::create(b, loc, b.getF32Type(), APFloat(0.0f));
    break;
  case Start::Accumulator: {
    auto loop = cast<scf::ForOp>(op->getParentOp());
    Value first =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                              loop.getInductionVar(), loop.getLowerBound());
    beta = arith::SelectOp::create(
        b, loc, first,
        arith::ConstantFloatOp::create(b, loc, b.getF32Type(), APFloat(0.0f)),
        arith::ConstantFloatOp::create(b, loc, b.getF32Type(), APFloat(1.0f)));
    break;
  }
  }
  SmallVector<Value> args = {groupSize(Batch), groupSize(M), groupSize(N),
                             groupSize(K)};
  std::pair<int, int> matrices[3] = {{M, K}, {K, N}, {M, N}};
  Value addresses[3] = {address(A), address(B), address(C)};
  // Batch loops that do not collapse: host loops, each iteration moving
  // the addresses along.
  for (int64_t loop : plan.hostLoops) {
    auto hostLoop =
        scf::ForOp::create(b, loc, constant(0), loopSize(loop), constant(1));
    b.setInsertionPointToStart(hostLoop.getBody());
    for (int x = A; x <= C; ++x) {
      if (plan.position[x][loop] < 0)
        continue; // an input the loop does not index
      auto type = cast<MemRefType>(plan.buffers[x].getType());
      int64_t bytes = plan.strides[x][plan.position[x][loop]] *
                      (type.getElementTypeBitWidth() / 8);
      addresses[x] = arith::AddIOp::create(
          b, loc, addresses[x],
          arith::MulIOp::create(b, loc, hostLoop.getInductionVar(),
                                constant(bytes)));
    }
  }
  for (int x = A; x <= C; ++x) {
    args.push_back(addresses[x]);
    args.push_back(stride(x, matrices[x].first));
    args.push_back(stride(x, matrices[x].second));
    args.push_back(stride(x, Batch));
  }
  args.push_back(constant(types));
  args.push_back(beta);
  auto call = func::CallOp::create(b, loc, gemm, args);
  // The call keeps what the contraction computed, for profiles and errors.
  call->setAttr("accrue.gemm", b.getUnitAttr());
  op.erase();
}

struct CudaContractionsToGemmPass
    : public accrue::cuda::impl::CudaContractionsToGemmBase<
          CudaContractionsToGemmPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    IRRewriter rewriter(&getContext());
    for (auto step : module.getOps<func::FuncOp>()) {
      if (!step->hasAttr(train::StepAttrs::kABI))
        continue;
      SmallVector<linalg::GenericOp> contractions;
      step.walk([&](linalg::GenericOp op) {
        if (op.hasPureBufferSemantics() && matchContraction(op))
          contractions.push_back(op);
      });
      // First what the operands are exact in, on the IR as bufferized (a
      // call that replaces a contraction hides what it writes), then the
      // folds into the accumulator, then the calls.
      // Only f32 inputs can hold narrower values.
      SmallVector<AccrueDType> exact;
      for (linalg::GenericOp op : contractions) {
        Contraction c = *matchContraction(op);
        AccrueDType precision = ACCRUE_DTYPE_FLOAT32;
        if (c.lhsElement.isF32() && c.rhsElement.isF32()) {
          AccrueDType lhs = exactIn(op.getDpsInputs()[c.lhs], op),
                      rhs = exactIn(op.getDpsInputs()[c.rhs], op);
          if (lhs == rhs)
            precision = lhs;
        }
        exact.push_back(precision);
      }
      SmallVector<Start> starts;
      for (linalg::GenericOp op : contractions) {
        std::optional<bool> folded = foldIntoAccumulator(op, step);
        starts.push_back(folded && *folded ? Start::Accumulator : Start::Given);
      }
      for (auto [op, start, precision] :
           llvm::zip(contractions, starts, exact)) {
        FailureOr<Plan> plan = planGemm(op, *matchContraction(op));
        if (failed(plan))
          continue; // stays a kernel
        if (plan->splitReduction) {
          if (!compactReductionInputs(rewriter, op, *matchContraction(op),
                                      *plan))
            continue; // stays a kernel
          plan = planGemm(op, *matchContraction(op));
          if (failed(plan) || plan->splitReduction) {
            op.emitError("its inputs, copied with the summed dimensions "
                         "innermost, do not make a GEMM");
            return signalPassFailure();
          }
        }
        if (compactBatchInputs(rewriter, op, *matchContraction(op), *plan))
          plan = planGemm(op, *matchContraction(op));
        if (failed(plan)) {
          op.emitError("its inputs, copied with the batch dimensions "
                       "outermost, do not make a GEMM");
          return signalPassFailure();
        }
        if (start == Start::Given)
          if (linalg::FillOp fill = zeroFillBefore(op)) {
            fill.erase();
            start = Start::Zero;
          }
        // A product rounded to bf16 or f16: the GEMM writes the rounded
        // values, in half the bytes, and the f32 buffer goes.
        std::optional<std::pair<linalg::GenericOp, Value>> rounding;
        if (start == Start::Zero)
          rounding = roundingAfter(op);
        Value out = op.getDpsInits()[0];
        if (rounding) {
          Value rounded = rounding->second;
          int64_t offset;
          plan->buffers[C] = rounded;
          if (failed(cast<MemRefType>(rounded.getType())
                         .getStridesAndOffset(plan->strides[C], offset)))
            return signalPassFailure();
          plan->outputType =
              *gemmType(cast<MemRefType>(rounded.getType()).getElementType());
        }
        emitGemm(op, *plan, start, precision, gemmFunction(module));
        if (rounding) {
          // The f32 buffer and the view the contraction wrote it through.
          rounding->first.erase();
          for (Operation *dead = out.getDefiningOp();
               dead && dead->use_empty();) {
            Operation *source = dead->getNumOperands()
                                    ? dead->getOperand(0).getDefiningOp()
                                    : nullptr;
            dead->erase();
            dead = source;
          }
        }
      }
    }
  }
};

} // namespace
