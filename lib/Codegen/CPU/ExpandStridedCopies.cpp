//===- ExpandStridedCopies.cpp - strided copies as loops --------*- C++ -*-===//

#include "accrue/Codegen/CPU/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace accrue::cpu {
#define GEN_PASS_DEF_EXPANDSTRIDEDCOPIES
#include "accrue/Codegen/CPU/Passes.h.inc"
} // namespace accrue::cpu

using namespace mlir;

namespace {
struct ExpandStridedCopiesPass
    : public accrue::cpu::impl::ExpandStridedCopiesBase<
          ExpandStridedCopiesPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<memref::CopyOp> copies;
    getOperation()->walk([&](memref::CopyOp copy) {
      auto source = cast<MemRefType>(copy.getSource().getType());
      auto target = cast<MemRefType>(copy.getTarget().getType());
      if (!source.getLayout().isIdentity() || !target.getLayout().isIdentity())
        copies.push_back(copy);
    });
    for (memref::CopyOp copy : copies) {
      OpBuilder b(copy);
      linalg::CopyOp::create(b, copy.getLoc(), copy.getSource(),
                             copy.getTarget());
      copy.erase();
    }
  }
};
} // namespace
