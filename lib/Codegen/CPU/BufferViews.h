//===- BufferViews.h - the buffer behind a memref view -----------*- C++
//-*-===//
//
// What the CPU passes that reason about buffers after bufferization share.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_CODEGEN_CPU_BUFFERVIEWS_H
#define ACCRUE_CODEGEN_CPU_BUFFERVIEWS_H

#include "mlir/IR/Value.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace accrue::cpu {

/// The buffer a view (chain) of memref views looks into.
inline mlir::Value rootOf(mlir::Value v) {
  while (auto view = v.getDefiningOp<mlir::ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

} // namespace accrue::cpu

#endif // ACCRUE_CODEGEN_CPU_BUFFERVIEWS_H
