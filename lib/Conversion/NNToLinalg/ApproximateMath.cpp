//===- ApproximateMath.cpp - polynomial math on the CPU ---------*- C++ -*-===//

#include "accrue/Conversion/Passes.h"

#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/StringSet.h"

namespace accrue {
#define GEN_PASS_DEF_APPROXIMATEMATH
#include "accrue/Conversion/Passes.h.inc"
} // namespace accrue

using namespace mlir;

namespace {

struct ApproximateMathPass
    : accrue::impl::ApproximateMathBase<ApproximateMathPass> {
  using Base::Base;

  void runOnOperation() override {
    llvm::StringSet<> names;
    for (const std::string &op : ops)
      names.insert(op);
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(
        patterns, [&](StringRef name) { return names.contains(name); });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
