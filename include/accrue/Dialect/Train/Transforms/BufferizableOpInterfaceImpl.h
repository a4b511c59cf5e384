//===- BufferizableOpInterfaceImpl.h - train ops on buffers -----*- C++ -*-===//

#ifndef ACCRUE_DIALECT_TRAIN_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H
#define ACCRUE_DIALECT_TRAIN_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace accrue::train {

/// One-shot bufferization of `train.accumulate`: it updates the accumulator
/// buffer in place, one subview per gradient.
void registerBufferizableOpInterfaceExternalModels(
    mlir::DialectRegistry &registry);

} // namespace accrue::train

#endif // ACCRUE_DIALECT_TRAIN_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H
