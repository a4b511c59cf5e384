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

#include "BiasGradients.h"
#include "BufferOps.h"
#include "GemmPlans.h"

#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace accrue::cuda {
#define GEN_PASS_DEF_CUDACONTRACTIONSTOGEMM
#include "accrue/Codegen/CUDA/Passes.h.inc"
} // namespace accrue::cuda

using namespace mlir;
using namespace accrue;
using namespace accrue::cuda;
using namespace accrue::codegen;
using namespace accrue::cuda::gemm;

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
  inputs.push_back(index);
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

/// A contraction's bias gradient (BiasGradients.h) on buffers: the sum, its
/// zero fill, the vector it writes and which of the GEMM's inputs it sums.
struct BiasGradient {
  linalg::GenericOp sum;
  linalg::FillOp fill;
  Value vector;
  AccrueGemmEpilogue epilogue;
};

/// The bias gradient cuda-split-reductions paired with contraction `op`
/// (planned as `plan`), if its GEMM call can compute it: the sum, in `op`'s
/// block, writes a contiguous f32 vector of the M (N) loop's extent, from
/// a zero fill, and nothing else touches that vector between the fill or
/// the contraction and the sum or the contraction (the call writes it where
/// the contraction stands); the GEMM has no batch and one M (N) loop.
std::optional<BiasGradient>
biasGradientOf(linalg::GenericOp op, const Plan &plan,
               llvm::DenseMap<int64_t, linalg::GenericOp> &sums) {
  auto pair = op->getAttrOfType<DenseI64ArrayAttr>(kBiasGradientAttr);
  if (!pair || pair.size() != 2 || !sums.lookup(pair[0]))
    return std::nullopt;
  linalg::GenericOp sum = sums.lookup(pair[0]);
  Contraction c = *matchContraction(op);
  bool ofA = pair[1] == int64_t(c.lhs);
  int kind = ofA ? M : N;
  if (sum->getBlock() != op->getBlock() || !plan.loops[Batch].empty() ||
      !plan.hostLoops.empty() || plan.loops[kind].size() != 1 ||
      ShapedType::isDynamic(plan.ranges[plan.loops[kind][0]]))
    return std::nullopt;
  Value vector = sum.getDpsInits()[0];
  auto type = cast<MemRefType>(vector.getType());
  if (!type.hasStaticShape() || !type.getElementType().isF32() ||
      type.getNumElements() != plan.ranges[plan.loops[kind][0]] ||
      !type.areTrailingDimsContiguous(type.getRank()))
    return std::nullopt;
  linalg::FillOp fill = zeroFillBefore(sum);
  std::optional<ViewRoot> region = rootOf(vector);
  if (!fill || !region)
    return std::nullopt;
  Operation *first = fill->isBeforeInBlock(op) ? fill : op;
  Operation *last = sum->isBeforeInBlock(op) ? op : sum;
  for (Operation *between = first->getNextNode(); between != last;
       between = between->getNextNode())
    if (between != sum && between != op && between != fill &&
        touchedElsewhere(between, *region, {}))
      return std::nullopt;
  if (auto alloc = vector.getDefiningOp<memref::AllocOp>();
      alloc && alloc->getNumOperands() == 0 &&
      alloc->getBlock() == op->getBlock() && op->isBeforeInBlock(alloc))
    alloc->moveBefore(op);
  if (failed(hoistViewBefore(vector, op)))
    return std::nullopt;
  sums.erase(pair[0]); // erased with the call
  return BiasGradient{sum, fill, vector,
                      ofA ? ACCRUE_GEMM_EPILOGUE_BIAS_GRADIENT_A
                          : ACCRUE_GEMM_EPILOGUE_BIAS_GRADIENT_B};
}

/// Replaces `op` by a call of the GEMM entry; its f32 inputs hold values
/// exact in `exact` (f32 when nothing narrower); with `bias`, the call also
/// writes that bias gradient (and the sum goes).
void emitGemm(linalg::GenericOp op, const Plan &plan, Start start,
              AccrueDType exact, func::FuncOp gemm,
              const std::optional<BiasGradient> &bias) {
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
                  int64_t(exact) << 16 |
                  int64_t(bias ? bias->epilogue : ACCRUE_GEMM_EPILOGUE_NONE)
                      << 24;
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
  if (bias) {
    // The vector's address (the builder is past the host loops: none here).
    auto type = cast<MemRefType>(bias->vector.getType());
    Value offset =
        memref::ExtractStridedMetadataOp::create(b, loc, bias->vector)
            .getOffset();
    Value base =
        memref::ExtractAlignedPointerAsIndexOp::create(b, loc, bias->vector);
    args.push_back(b.createOrFold<arith::AddIOp>(
        loc, base,
        b.createOrFold<arith::MulIOp>(
            loc, offset, constant(type.getElementTypeBitWidth() / 8))));
  } else {
    args.push_back(constant(0));
  }
  auto call = func::CallOp::create(b, loc, gemm, args);
  // The call keeps what the contraction computed, for profiles and errors.
  call->setAttr("accrue.gemm", b.getUnitAttr());
  op.erase();
  if (bias) {
    // What reads the vector (its add into the accumulator, located at the
    // step) is named after the sum's node as well, for the kernel report.
    SmallVector<Value> views = {bias->vector};
    while (!views.empty()) {
      Value view = views.pop_back_val();
      for (Operation *user : view.getUsers()) {
        if (user == bias->sum || user == bias->fill || user == call)
          continue;
        if (isa<ViewLikeOpInterface, memref::ExpandShapeOp,
                memref::CollapseShapeOp>(user))
          llvm::append_range(views, user->getResults());
        else if (isa<linalg::LinalgOp>(user))
          user->setLoc(FusedLoc::get(user->getContext(),
                                     {bias->sum->getLoc(), user->getLoc()}));
      }
    }
    bias->sum->erase();
    bias->fill->erase();
  }
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
      llvm::DenseMap<int64_t, linalg::GenericOp> biasGradients;
      step.walk([&](linalg::GenericOp op) {
        if (op.hasPureBufferSemantics() && matchContraction(op))
          contractions.push_back(op);
        else if (auto number =
                     op->getAttrOfType<IntegerAttr>(kBiasGradientAttr)) {
          // A number marking two sums pairs neither.
          auto [entry, fresh] = biasGradients.try_emplace(number.getInt(), op);
          if (!fresh)
            entry->second = nullptr;
        }
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
        emitGemm(op, *plan, start, precision, gemmFunction(module),
                 biasGradientOf(op, *plan, biasGradients));
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
