//===- VectorKernels.cpp - kernel forms with vector accesses ----*- C++ -*-===//
//
// Two forms of cuda-form-kernels whose threads move 4 elements per access:
// elementwise ops over rank-1 buffers stream through a grid-stride loop,
// and transposes take a 4 x 4 tile per thread, so that every warp request
// uses whole 32-byte sectors.
//
//===----------------------------------------------------------------------===//

#include "KernelForms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;

namespace {

/// The loop whose index is the last result of operand `k`'s map, where the
/// operand is a buffer read or written 4 elements at a time along it: a
/// map of loop dimensions only, a unit last stride, and a static offset and
/// other strides that are multiples of 4 (buffers start 256-byte aligned),
/// so that every 4-aligned run is one aligned vector access.
std::optional<unsigned> vectorLoop(linalg::GenericOp op, unsigned k,
                                   int64_t width) {
  Value operand = op->getOperand(k);
  auto type = dyn_cast<MemRefType>(operand.getType());
  AffineMap map = op.getIndexingMapsArray()[k];
  SmallVector<int64_t> strides;
  int64_t offset;
  if (!type || type.getRank() == 0 || !map.isProjectedPermutation() ||
      map.getNumResults() != type.getRank() ||
      !type.getElementType().isIntOrFloat() ||
      type.getElementTypeBitWidth() % 8 != 0 ||
      failed(type.getStridesAndOffset(strides, offset)) ||
      strides.back() != 1 || ShapedType::isDynamic(offset) ||
      offset % width != 0)
    return std::nullopt;
  for (int64_t stride : ArrayRef<int64_t>(strides).drop_back())
    if (ShapedType::isDynamic(stride) || stride % width != 0)
      return std::nullopt;
  return cast<AffineDimExpr>(map.getResults().back()).getPosition();
}

} // namespace

namespace accrue::cuda::forms {

/// The streaming form of an elementwise op over rank-1 buffers (the fused
/// optimizer update, elementwise passes over the arenas): a grid-stride
/// loop in which each thread takes 4 consecutive elements of every operand
/// with one aligned vector load or store (16 bytes for f32), the body run
/// once per element. Applies when every buffer operand is rank 1 with unit
/// stride and a static offset that is a multiple of 4 (buffers start
/// 256-byte aligned: arguments and workspace views) or rank 0 (a scalar
/// every element reads), its elements whole bytes, and the size is a
/// static multiple of 4.
LogicalResult formStreamingKernel(RewriterBase &rewriter, linalg::GenericOp op,
                                  int64_t blockSize, int64_t maxBlocks) {
  constexpr int64_t kWidth = 4;
  if (op.getNumLoops() != 1 || op.getNumReductionLoops() != 0)
    return failure();
  // A body with loops (a reduction's first stage) gets a thread per point:
  // streamed, each thread would run several points' loops one after the
  // other, and neighbouring threads would read 4 points apart.
  if (!op.getRegion().front().getOps<scf::ForOp>().empty())
    return failure();
  int64_t size = op.getStaticLoopRanges()[0];
  if (ShapedType::isDynamic(size) || size % kWidth != 0 || size == 0)
    return failure();
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  for (auto [k, operand] : llvm::enumerate(op->getOperands())) {
    auto type = dyn_cast<MemRefType>(operand.getType());
    if (!type)
      continue; // a scalar input
    if (type.getRank() == 0)
      continue;
    SmallVector<int64_t> strides;
    int64_t offset;
    if (type.getRank() != 1 || !maps[k].isIdentity() ||
        failed(type.getStridesAndOffset(strides, offset)) || strides[0] != 1 ||
        ShapedType::isDynamic(offset) || offset % kWidth != 0 ||
        !type.getElementType().isIntOrFloat() ||
        // i1 buffers hold a byte per element, vectors of i1 a bit.
        type.getElementTypeBitWidth() % 8 != 0)
      return failure();
  }
  Location loc = FusedLoc::get(op.getContext(), {op.getLoc()},
                               rewriter.getStringAttr(kernelTag(op)));
  rewriter.setInsertionPoint(op);
  auto index = [&](OpBuilder &b, int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  int64_t chunks = size / kWidth;
  int64_t blocks =
      std::min<int64_t>((chunks + blockSize - 1) / blockSize, maxBlocks);
  int64_t threads = std::min<int64_t>(blockSize, chunks);
  Value first = createLinearLaunch(rewriter, loc, index(rewriter, blocks),
                                   index(rewriter, threads));
  Value stride = index(rewriter, blocks * threads);
  Block &opBody = op.getRegion().front();
  unsigned numInputs = op.getNumDpsInputs();
  scf::ForOp::create(
      rewriter, loc, first, index(rewriter, chunks), stride, ValueRange{},
      [&](OpBuilder &b, Location, Value chunk, ValueRange) {
        Value base = arith::MulIOp::create(b, loc, chunk, index(b, kWidth));
        // One vector per rank-1 operand the body reads; one load per
        // scalar operand.
        SmallVector<Value> loaded(op->getNumOperands());
        for (auto [k, operand] : llvm::enumerate(op->getOperands())) {
          auto type = dyn_cast<MemRefType>(operand.getType());
          bool read = k < numInputs || !opBody.getArgument(k).use_empty();
          if (!type || !read)
            continue;
          if (type.getRank() == 0) {
            loaded[k] = memref::LoadOp::create(b, loc, operand, ValueRange{});
            continue;
          }
          auto vectorType = VectorType::get({kWidth}, type.getElementType());
          loaded[k] = vector::LoadOp::create(
              b, loc, vectorType, operand, ValueRange{base},
              /*nontemporal=*/false,
              llvm::MaybeAlign(kWidth * type.getElementTypeBitWidth() / 8));
        }
        SmallVector<SmallVector<Value>> results(op.getNumDpsInits());
        for (int64_t j = 0; j < kWidth; ++j) {
          IRMapping mapping;
          for (auto [k, operand] : llvm::enumerate(op->getOperands())) {
            BlockArgument arg = opBody.getArgument(k);
            if (!isa<MemRefType>(operand.getType())) {
              mapping.map(arg, operand);
              continue;
            }
            if (!loaded[k])
              continue;
            mapping.map(arg,
                        isa<VectorType>(loaded[k].getType())
                            ? vector::ExtractOp::create(b, loc, loaded[k], j)
                                  .getResult()
                            : loaded[k]);
          }
          Value element = arith::AddIOp::create(b, loc, base, index(b, j));
          for (Operation &bodyOp : opBody.without_terminator()) {
            if (auto indexOp = dyn_cast<linalg::IndexOp>(bodyOp)) {
              mapping.map(indexOp.getResult(), element);
              continue;
            }
            b.clone(bodyOp, mapping);
          }
          for (auto [k, yielded] :
               llvm::enumerate(opBody.getTerminator()->getOperands()))
            results[k].push_back(mapping.lookupOrDefault(yielded));
        }
        for (auto [k, init] : llvm::enumerate(op.getDpsInits())) {
          auto type = cast<MemRefType>(init.getType());
          auto vectorType = VectorType::get({kWidth}, type.getElementType());
          Value packed =
              vector::FromElementsOp::create(b, loc, vectorType, results[k]);
          vector::StoreOp::create(
              b, loc, packed, init, ValueRange{base},
              /*nontemporal=*/false,
              llvm::MaybeAlign(kWidth * type.getElementTypeBitWidth() / 8));
        }
        scf::YieldOp::create(b, loc);
      });
  rewriter.eraseOp(op);
  return success();
}

/// The tiled form of an elementwise op that transposes (a weight's or
/// attention's transpose, often with a cast): one thread per 4 x 4 tile of
/// the two loops `a` (the input's contiguous dimension) and `b` (the
/// output's). A thread reads 4 runs of 4 input elements along `a` and
/// writes 4 runs of 4 output elements along `b`, one vector access each,
/// computing the body for its 16 points in between (the op reads nothing
/// else but scalars). Lanes are grouped so that a warp's accesses fill
/// whole 32-byte sectors on both sides: Q neighbouring lanes take
/// neighbouring tiles along `b` (Q x 4 output
/// elements are 32 bytes: Q = 2 for f32, 4 for bf16), and the next lanes
/// the next tiles along `a` (16 bytes each, contiguous). One thread per
/// point instead reads 4 bytes of a different sector in every lane (12.5%
/// of the sectors' bytes). Every output element is still computed once,
/// from the same inputs: the same values.
LogicalResult formTransposeKernel(RewriterBase &rewriter, linalg::GenericOp op,
                                  int64_t blockSize) {
  constexpr int64_t kTile = 4;
  if (op.getNumReductionLoops() != 0 || op.getNumDpsInits() != 1 ||
      op.getNumLoops() < 2 || !op.hasPureBufferSemantics() ||
      !op.getRegion().front().getOps<scf::ForOp>().empty())
    return failure();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (llvm::any_of(ranges, ShapedType::isDynamic))
    return failure();
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  unsigned numInputs = op.getNumDpsInputs();
  unsigned outIndex = numInputs;
  std::optional<unsigned> b = vectorLoop(op, outIndex, kTile);
  if (!b || !maps[outIndex].isPermutation())
    return failure();
  // The transposed input: contiguous along another loop, strided along b.
  std::optional<unsigned> a;
  int64_t transposed = -1;
  for (unsigned k = 0; k < numInputs && transposed < 0; ++k) {
    std::optional<unsigned> inner = vectorLoop(op, k, kTile);
    if (inner && *inner != *b && maps[k].isFunctionOfDim(*b)) {
      a = inner;
      transposed = k;
    }
  }
  if (!a || ranges[*a] % kTile != 0 || ranges[*b] % kTile != 0)
    return failure();
  // Nothing else read element by element (those reads would scatter).
  for (unsigned k = 0; k < numInputs; ++k) {
    auto type = dyn_cast<MemRefType>(op->getOperand(k).getType());
    if (k != static_cast<unsigned>(transposed) && type && type.getRank() != 0)
      return failure();
  }
  auto outType = cast<MemRefType>(op.getDpsInits()[0].getType());
  int64_t outBytes = outType.getElementTypeBitWidth() / 8;
  int64_t tilesA = ranges[*a] / kTile, tilesB = ranges[*b] / kTile;
  int64_t lanesB = std::max<int64_t>(1, 32 / (kTile * outBytes));
  if (tilesB % lanesB != 0)
    lanesB = 1;
  int64_t total = tilesA * tilesB;
  SmallVector<unsigned> others;
  for (unsigned d = 0; d < op.getNumLoops(); ++d)
    if (d != *a && d != *b) {
      others.push_back(d);
      total *= ranges[d];
    }

  Location loc = FusedLoc::get(op.getContext(), {op.getLoc()},
                               rewriter.getStringAttr(kernelTag(op)));
  rewriter.setInsertionPoint(op);
  auto index = [&](OpBuilder &builder, int64_t v) -> Value {
    return arith::ConstantIndexOp::create(builder, loc, v);
  };
  int64_t threads = std::min(blockSize, total);
  Value thread = createLinearLaunch(
      rewriter, loc, index(rewriter, llvm::divideCeil(total, threads)),
      index(rewriter, threads));
  Value inRange = arith::CmpIOp::create(
      rewriter, loc, arith::CmpIPredicate::ult, thread, index(rewriter, total));
  auto guard = scf::IfOp::create(rewriter, loc, inRange, false);
  rewriter.setInsertionPointToStart(guard.thenBlock());
  // thread = ((others * tilesB / lanesB + group) * tilesA + p) * lanesB + q
  SmallVector<Value> ivs(op.getNumLoops());
  Value rest = thread;
  auto take = [&](int64_t extent) {
    Value digit =
        arith::RemUIOp::create(rewriter, loc, rest, index(rewriter, extent));
    rest = arith::DivUIOp::create(rewriter, loc, rest, index(rewriter, extent));
    return digit;
  };
  Value q = take(lanesB);
  Value p = take(tilesA);
  Value group = take(tilesB / lanesB);
  for (unsigned d : llvm::reverse(others))
    ivs[d] = take(ranges[d]);
  ivs[*a] = arith::MulIOp::create(rewriter, loc, p, index(rewriter, kTile));
  Value tileB = arith::AddIOp::create(
      rewriter, loc,
      arith::MulIOp::create(rewriter, loc, group, index(rewriter, lanesB)), q);
  ivs[*b] = arith::MulIOp::create(rewriter, loc, tileB, index(rewriter, kTile));
  auto at = [&](int64_t da, int64_t db) {
    SmallVector<Value> point = ivs;
    point[*a] =
        arith::AddIOp::create(rewriter, loc, ivs[*a], index(rewriter, da));
    point[*b] =
        arith::AddIOp::create(rewriter, loc, ivs[*b], index(rewriter, db));
    return point;
  };

  // The transposed input's 4 runs along a, one per row of b.
  Value input = op->getOperand(transposed);
  auto inType = cast<MemRefType>(input.getType());
  auto inVector = VectorType::get({kTile}, inType.getElementType());
  SmallVector<Value> runs;
  for (int64_t db = 0; db < kTile; ++db)
    runs.push_back(vector::LoadOp::create(
        rewriter, loc, inVector, input,
        applyMap(rewriter, loc, maps[transposed], at(0, db)),
        /*nontemporal=*/false,
        llvm::MaybeAlign(kTile * inType.getElementTypeBitWidth() / 8)));
  Block &opBody = op.getRegion().front();
  Value init = op.getDpsInits()[0];
  auto outVector = VectorType::get({kTile}, outType.getElementType());
  auto outAlign = llvm::MaybeAlign(kTile * outBytes);
  // An op adding into its output (a gradient's accumulation) reads the
  // output's tile as it writes it: 4 runs along b.
  bool readsOut = !opBody.getArgument(outIndex).use_empty();
  for (int64_t da = 0; da < kTile; ++da) {
    Value outRun;
    if (readsOut)
      outRun = vector::LoadOp::create(
          rewriter, loc, outVector, init,
          applyMap(rewriter, loc, maps[outIndex], at(da, 0)),
          /*nontemporal=*/false, outAlign);
    SmallVector<Value> results;
    for (int64_t db = 0; db < kTile; ++db) {
      SmallVector<Value> point = at(da, db);
      IRMapping mapping;
      for (auto [k, operand] : llvm::enumerate(op->getOperands())) {
        BlockArgument arg = opBody.getArgument(k);
        if (arg.use_empty())
          continue;
        if (k == static_cast<unsigned>(transposed))
          mapping.map(arg,
                      vector::ExtractOp::create(rewriter, loc, runs[db], da)
                          .getResult());
        else if (k == outIndex)
          mapping.map(
              arg,
              vector::ExtractOp::create(rewriter, loc, outRun, db).getResult());
        else if (!isa<MemRefType>(operand.getType()))
          mapping.map(arg, operand); // a scalar input
        else
          mapping.map(arg, memref::LoadOp::create(
                               rewriter, loc, operand,
                               applyMap(rewriter, loc, maps[k], point)));
      }
      cloneBodyAt(rewriter, opBody, point, mapping);
      results.push_back(
          mapping.lookupOrDefault(opBody.getTerminator()->getOperand(0)));
    }
    vector::StoreOp::create(
        rewriter, loc,
        vector::FromElementsOp::create(rewriter, loc, outVector, results), init,
        applyMap(rewriter, loc, maps[outIndex], at(da, 0)),
        /*nontemporal=*/false, outAlign);
  }
  rewriter.eraseOp(op);
  return success();
}
} // namespace accrue::cuda::forms
