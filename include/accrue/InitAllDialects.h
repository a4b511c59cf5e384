//===- InitAllDialects.h - register Accrue's dialects -----------*- C++ -*-===//

#ifndef ACCRUE_INITALLDIALECTS_H
#define ACCRUE_INITALLDIALECTS_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace accrue {

/// Adds the `nn` and `train` dialects, every upstream dialect the pipelines
/// produce, and the external interface models (bufferization, inlining) they
/// need, in one place.
void registerAllDialects(mlir::DialectRegistry &registry);

} // namespace accrue

#endif // ACCRUE_INITALLDIALECTS_H
