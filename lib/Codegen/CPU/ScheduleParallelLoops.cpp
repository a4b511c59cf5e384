//===- ScheduleParallelLoops.cpp - choose the loops worth a fork -*- C++
//-*-===//
//
// Keeps the scf.parallel loops that are worth running on several threads
// (outermost, with enough work) and turns the others into nested scf.for
// loops; see the pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/CPU/ContractionKernels.h"
#include "accrue/Codegen/CPU/Passes.h"

#include "LoopAnnotations.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"

namespace accrue::cpu {
#define GEN_PASS_DEF_SCHEDULEPARALLELLOOPS
#include "accrue/Codegen/CPU/Passes.h.inc"
} // namespace accrue::cpu

using namespace mlir;

namespace {

/// The static trip count of a loop dimension, or 1 when it is not static.
int64_t tripCount(Value lb, Value ub, Value step) {
  auto constant = [](Value v) -> std::optional<int64_t> {
    if (auto c = v.getDefiningOp<arith::ConstantIndexOp>())
      return c.value();
    return std::nullopt;
  };
  std::optional<int64_t> l = constant(lb), u = constant(ub), s = constant(step);
  if (!l || !u || !s || *s <= 0 || *u <= *l)
    return 1;
  return (*u - *l + *s - 1) / *s;
}

/// The iterations of `op`'s loops and of every loop nested in its body
/// (the most deeply nested path), an estimate of its work.
int64_t work(Operation *op) {
  int64_t own = 1;
  if (auto parallel = dyn_cast<scf::ParallelOp>(op)) {
    for (auto [lb, ub, step] :
         llvm::zip(parallel.getLowerBound(), parallel.getUpperBound(),
                   parallel.getStep()))
      own *= tripCount(lb, ub, step);
  } else if (auto loop = dyn_cast<scf::ForOp>(op)) {
    own = tripCount(loop.getLowerBound(), loop.getUpperBound(), loop.getStep());
  }
  int64_t inner = 1;
  for (Region &region : op->getRegions())
    for (Block &block : region)
      for (Operation &nested : block)
        if (isa<scf::ParallelOp, scf::ForOp>(nested))
          inner = std::max(inner, work(&nested));
  return own * inner;
}

/// Whether `loop` (no loop inside it, scalar code) reads and writes only
/// consecutive elements along its induction variable (each load's and
/// store's last index is the variable, the others are defined outside the
/// loop, the buffer is contiguous along its last dimension), or reads
/// elements it does not move (a bias broadcast along it). Vectorized, such a
/// loop loads and stores whole vectors; others (a pooling window's strided
/// reads) are left to LLVM's cost model.
bool readsAndWritesRows(scf::ForOp loop) {
  // (A loop shorter than a vector of floats is unroll-short-loops' to
  // mark, or LLVM's to leave scalar.)
  std::optional<APInt> trips = loop.getStaticTripCount();
  if (trips && trips->ult(16))
    return false;
  auto outside = [&](Value index) {
    return loop.isDefinedOutsideOfLoop(index);
  };
  auto contiguous = [&](Value memref, ValueRange indices) {
    auto type = cast<MemRefType>(memref.getType());
    SmallVector<int64_t> strides;
    int64_t offset;
    return !indices.empty() &&
           succeeded(type.getStridesAndOffset(strides, offset)) &&
           strides.back() == 1 && indices.back() == loop.getInductionVar() &&
           llvm::all_of(indices.drop_back(), outside);
  };
  WalkResult walk = loop.getBody()->walk([&](Operation *op) {
    bool rows = true;
    if (isa<LoopLikeOpInterface>(op) ||
        llvm::any_of(op->getResultTypes(), llvm::IsaPred<VectorType>))
      rows = false;
    else if (auto load = dyn_cast<memref::LoadOp>(op))
      rows = contiguous(load.getMemref(), load.getIndices()) ||
             llvm::all_of(load.getIndices(), outside);
    else if (auto store = dyn_cast<memref::StoreOp>(op))
      rows = contiguous(store.getMemref(), store.getIndices());
    return rows ? WalkResult::advance() : WalkResult::interrupt();
  });
  return !walk.wasInterrupted();
}

/// Replaces a parallel loop without reductions by one over its first
/// `keep` dimensions (none: no parallel loop) around nested scf.for loops
/// over the others. OpenMP linearizes a multi-dimensional loop, paying a
/// division per iteration and hiding the inner loops from LLVM's
/// vectorizer, so only the dimensions needed to share the work stay.
void serialize(scf::ParallelOp op, unsigned keep = 0) {
  OpBuilder b(op);
  IRMapping mapping;
  auto lbs = op.getLowerBound(), ubs = op.getUpperBound(), steps = op.getStep();
  SmallVector<Value> ivs = op.getInductionVars();
  if (keep) {
    auto outer =
        scf::ParallelOp::create(b, op.getLoc(), lbs.take_front(keep),
                                ubs.take_front(keep), steps.take_front(keep));
    outer->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    for (auto [from, to] : llvm::zip(ArrayRef<Value>(ivs).take_front(keep),
                                     outer.getInductionVars()))
      mapping.map(from, to);
    b.setInsertionPoint(outer.getBody()->getTerminator());
  }
  scf::ForOp innermost;
  for (unsigned d = keep; d < op.getNumLoops(); ++d) {
    innermost = scf::ForOp::create(b, op.getLoc(), lbs[d], ubs[d], steps[d]);
    mapping.map(ivs[d], innermost.getInductionVar());
    b.setInsertionPoint(innermost.getBody()->getTerminator());
  }
  for (Operation &inner : op.getBody()->without_terminator())
    b.clone(inner, mapping);
  op.erase();
  // The iterations of a parallel loop are independent: said so, LLVM
  // vectorizes the innermost one without checking at run time that its
  // buffers do not overlap, checks it hoists out of the loops around it,
  // where the slices of one buffer that an op writes row by row (an LSTM
  // cell's gate gradients, side by side in each row of their stack) do
  // overlap, and that send every row down the scalar loop.
  if (innermost && readsAndWritesRows(innermost))
    accrue::cpu::annotateLoop(innermost, /*vectorize=*/false,
                              /*parallel=*/true);
}

/// How many leading dimensions of `op` give enough iterations to share
/// among threads (at least 16, or all of them).
unsigned dimensionsToKeep(scf::ParallelOp op) {
  int64_t iterations = 1;
  for (unsigned d = 0; d < op.getNumLoops(); ++d) {
    iterations *= tripCount(op.getLowerBound()[d], op.getUpperBound()[d],
                            op.getStep()[d]);
    if (iterations >= 16)
      return d + 1;
  }
  return op.getNumLoops();
}

/// The work of one iteration of `op`'s body: 1, plus `transcendentalWork`
/// for each transcendental function in it (approximate-math makes exp,
/// log, tanh and erf polynomials of a dozen or more instructions where an
/// elementwise add is one; the others are libm calls).
int64_t iterationWork(scf::ParallelOp op, int64_t transcendentalWork) {
  int64_t transcendentals = 0;
  op.getBody()->walk([&](Operation *inner) {
    if (isa<math::ExpOp, math::Exp2Op, math::ExpM1Op, math::LogOp, math::Log2Op,
            math::Log10Op, math::Log1pOp, math::TanhOp, math::ErfOp,
            math::PowFOp, math::SinOp, math::CosOp, math::AtanOp,
            math::Atan2Op>(inner))
      ++transcendentals;
  });
  return 1 + transcendentalWork * transcendentals;
}

struct ScheduleParallelLoopsPass
    : accrue::cpu::impl::ScheduleParallelLoopsBase<ScheduleParallelLoopsPass> {
  using Base::Base;

  void runOnOperation() override {
    // Innermost first, so that serializing a loop clones loops already
    // decided (and never erases one still in the list). A loop nested in
    // another is serialized whatever becomes of the outer one.
    SmallVector<scf::ParallelOp> loops;
    getOperation().walk([&](scf::ParallelOp op) { loops.push_back(op); });
    for (scf::ParallelOp op : loops) {
      bool kernel = op->hasAttr(accrue::cpu::kParallelKernelAttr);
      bool nestedInParallel = op->getParentOfType<scf::ParallelOp>() != nullptr;
      bool nestedInLoop = op->getParentOfType<scf::ForOp>() != nullptr;
      bool keep =
          op.getNumResults() == 0 && !nestedInParallel &&
          (kernel ||
           (!nestedInLoop &&
            work(op) * iterationWork(op, transcendentalWork) >= minWork));
      if (keep) {
        ++numParallel;
        if (unsigned dims = dimensionsToKeep(op); dims < op.getNumLoops())
          serialize(op, dims);
        continue;
      }
      if (op.getNumResults() != 0)
        continue; // Not produced by this pipeline; left to scf-to-openmp.
      serialize(op);
      ++numSerialized;
    }
  }
};

} // namespace
