//===- Diagnostics.cpp - one-line diagnostics for the tools -----*- C++ -*-===//

#include "accrue/Compiler/Diagnostics.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"

using namespace mlir;
using namespace accrue;

/// The ONNX name a location carries, if any.
static std::optional<std::string> nodeName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (auto name = nodeName(inner))
        return name;
  if (auto callSite = dyn_cast<CallSiteLoc>(loc))
    return nodeName(callSite.getCallee());
  return std::nullopt;
}

OneLineDiagnosticHandler::OneLineDiagnosticHandler(MLIRContext *context,
                                                   StringRef tool,
                                                   llvm::raw_ostream &os)
    : ScopedDiagnosticHandler(context) {
  std::string toolName = tool.str();
  setHandler([this, toolName, &os](Diagnostic &diag) {
    const char *severity = "error";
    switch (diag.getSeverity()) {
    case DiagnosticSeverity::Error:
      ++numErrors;
      break;
    case DiagnosticSeverity::Warning:
      severity = "warning";
      break;
    case DiagnosticSeverity::Note:
      severity = "note";
      break;
    case DiagnosticSeverity::Remark:
      severity = "remark";
      break;
    }
    os << toolName << ": " << severity << ": ";
    // The importer names nodes plainly and graph inputs and initializers
    // with a "kind:" prefix.
    if (auto name = nodeName(diag.getLocation())) {
      StringRef text = *name;
      StringRef kind = "node";
      for (StringRef prefix : {"input", "initializer"})
        if (text.consume_front((prefix + ":").str())) {
          kind = prefix;
          break;
        }
      os << kind << " '" << text << "': ";
    }
    os << diag.str() << "\n";
    os.flush();
    return success();
  });
}
