//===- Diagnostics.h - one-line diagnostics for the tools -------*- C++ -*-===//

#ifndef ACCRUE_COMPILER_DIAGNOSTICS_H
#define ACCRUE_COMPILER_DIAGNOSTICS_H

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/raw_ostream.h"

namespace accrue {

/// Prints each diagnostic as one line, `<tool>: error: node 'X': message`,
/// where X is the ONNX node the location names (or `input 'X'`,
/// `initializer 'X'` for graph inputs and initializers).
/// Counts errors in `numErrors`.
class OneLineDiagnosticHandler : public mlir::ScopedDiagnosticHandler {
public:
  OneLineDiagnosticHandler(mlir::MLIRContext *context, llvm::StringRef tool,
                           llvm::raw_ostream &os = llvm::errs());
  unsigned numErrors = 0;
};

} // namespace accrue

#endif // ACCRUE_COMPILER_DIAGNOSTICS_H
