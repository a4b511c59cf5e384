//===- Diagnostics.h - one-line diagnostics for the tools -------*- C++ -*-===//

#ifndef ACCRUE_COMPILER_DIAGNOSTICS_H
#define ACCRUE_COMPILER_DIAGNOSTICS_H

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <string>

namespace accrue {

/// Prints each diagnostic as one line, `<tool>: error: node 'X': message`,
/// where X is the ONNX node the location names (or `input 'X'`,
/// `initializer 'X'` for graph inputs and initializers), with bytes that
/// are not printable UTF-8 escaped. Settings the message names
/// (accrue-runtime/Settings.h) are spelled by `spell`, the tool's flags.
/// Counts errors in `numErrors`.
class OneLineDiagnosticHandler : public mlir::ScopedDiagnosticHandler {
public:
  using Speller = std::function<std::string(const std::string &)>;
  OneLineDiagnosticHandler(mlir::MLIRContext *context, llvm::StringRef tool,
                           Speller spell, llvm::raw_ostream &os = llvm::errs());
  unsigned numErrors = 0;
};

/// `text` with invalid UTF-8 and control characters escaped as \xNN, so
/// a name from a model file prints as one readable line.
std::string escapeForDisplay(llvm::StringRef text);

/// "error", "warning", "note" or "remark".
const char *severityName(mlir::DiagnosticSeverity severity);

/// The diagnostic's message as one line, after the ONNX node, input or
/// initializer its location names (`node 'X': message`), settings spelled
/// by `spell`, unprintable bytes escaped.
std::string describeDiagnostic(
    mlir::Diagnostic &diag,
    const std::function<std::string(const std::string &)> &spell);

} // namespace accrue

#endif // ACCRUE_COMPILER_DIAGNOSTICS_H
