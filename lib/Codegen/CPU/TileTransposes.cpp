//===- TileTransposes.cpp - transposes in cache-sized blocks ----*- C++ -*-===//
//
// A transpose that moves the innermost dimension reads (or writes) one
// element per cache line when it runs as plain loops: transposing a
// 4096 x 256 weight took 5 ms, one element per 5 ns. In blocks of
// `tile` x `tile` elements both the rows read and the rows written stay
// in L1 while a block is copied. The blocks are an scf.parallel loop, so
// large transposes still run on all cores.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/CPU/ContractionKernels.h"
#include "accrue/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace accrue::cpu {
#define GEN_PASS_DEF_TILETRANSPOSES
#include "accrue/Codegen/CPU/Passes.h.inc"
} // namespace accrue::cpu

using namespace mlir;

namespace {

/// Tiles `op` (a static transpose on buffers that moves the innermost
/// dimension) into blocks; see the file header.
void tileTranspose(linalg::TransposeOp op, int64_t tile, bool parallel) {
  ArrayRef<int64_t> permutation = op.getPermutation();
  auto outType = cast<MemRefType>(op.getInit().getType());
  int64_t rank = outType.getRank();
  // Output dimension j reads input dimension permutation[j]: the output's
  // innermost dimension and the one the input's innermost becomes are
  // blocked, the others are single steps.
  int64_t written = rank - 1;
  int64_t read = llvm::find(permutation, rank - 1) - permutation.begin();
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto index = [&](int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v).getResult();
  };
  SmallVector<Value> lbs, ubs, steps;
  for (int64_t j = 0; j < rank; ++j) {
    bool blocked = j == written || j == read;
    lbs.push_back(index(0));
    ubs.push_back(index(outType.getDimSize(j)));
    steps.push_back(index(blocked ? tile : 1));
  }
  auto loop = scf::ParallelOp::create(b, loc, lbs, ubs, steps);
  if (parallel)
    loop->setAttr(accrue::cpu::kParallelKernelAttr, b.getUnitAttr());
  b.setInsertionPoint(loop.getBody()->getTerminator());
  SmallVector<OpFoldResult> outOffsets, outSizes, inOffsets(rank),
      inSizes(rank);
  SmallVector<OpFoldResult> ones(rank, b.getIndexAttr(1));
  for (int64_t j = 0; j < rank; ++j) {
    Value iv = loop.getInductionVars()[j];
    OpFoldResult size = b.getIndexAttr(1);
    if (j == written || j == read) {
      // The last block of a dimension that `tile` does not divide is
      // smaller.
      Value left = arith::SubIOp::create(b, loc, ubs[j], iv);
      size = arith::MinSIOp::create(b, loc, left, steps[j]).getResult();
    }
    outOffsets.push_back(iv);
    outSizes.push_back(size);
    inOffsets[permutation[j]] = iv;
    inSizes[permutation[j]] = size;
  }
  Value in = memref::SubViewOp::create(b, loc, op.getInput(), inOffsets,
                                       inSizes, ones);
  Value out = memref::SubViewOp::create(b, loc, op.getInit(), outOffsets,
                                        outSizes, ones);
  linalg::TransposeOp::create(b, loc, in, out, permutation);
  op.erase();
}

struct TileTransposesPass
    : accrue::cpu::impl::TileTransposesBase<TileTransposesPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<linalg::TransposeOp> transposes;
    getOperation().walk([&](linalg::TransposeOp op) {
      auto inType = dyn_cast<MemRefType>(op.getInput().getType());
      auto outType = dyn_cast<MemRefType>(op.getInit().getType());
      ArrayRef<int64_t> permutation = op.getPermutation();
      if (!inType || !outType || !inType.hasStaticShape() ||
          !outType.hasStaticShape() || permutation.empty() ||
          permutation.back() == outType.getRank() - 1 ||
          outType.getNumElements() < tile * tile)
        return;
      transposes.push_back(op);
    });
    for (linalg::TransposeOp op : transposes)
      tileTranspose(
          op, tile,
          parallel &&
              cast<MemRefType>(op.getInit().getType()).getNumElements() >=
                  minParallelElements);
    numTiled += transposes.size();
  }
};

} // namespace
