//===- Diagnostics.cpp - one-line diagnostics for the tools -----*- C++ -*-===//

#include "accrue/Compiler/Diagnostics.h"

#include "accrue/Dialect/NN/IR/NN.h"

#include "accrue-runtime/Settings.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"

using namespace mlir;
using namespace accrue;

const char *accrue::severityName(DiagnosticSeverity severity) {
  switch (severity) {
  case DiagnosticSeverity::Error:
    return "error";
  case DiagnosticSeverity::Warning:
    return "warning";
  case DiagnosticSeverity::Note:
    return "note";
  case DiagnosticSeverity::Remark:
    return "remark";
  }
  return "error";
}

std::string accrue::describeDiagnostic(
    Diagnostic &diag,
    const std::function<std::string(const std::string &)> &spell) {
  std::string out;
  // The importer names nodes plainly and graph inputs and initializers
  // with a "kind:" prefix.
  if (auto name = nn::getNodeName(diag.getLocation())) {
    StringRef text = *name;
    StringRef kind = "node";
    for (StringRef prefix : {"input", "initializer"})
      if (text.consume_front((prefix + ":").str())) {
        kind = prefix;
        break;
      }
    out += (kind + " '" + escapeForDisplay(text) + "': ").str();
  }
  return out + escapeForDisplay(renderSettings(diag.str(), spell));
}

std::string accrue::escapeForDisplay(StringRef text) {
  std::string out;
  const auto *bytes = reinterpret_cast<const unsigned char *>(text.data());
  size_t i = 0, n = text.size();
  auto escape = [&](unsigned char c) {
    static const char digits[] = "0123456789abcdef";
    out += "\\x";
    out += digits[c >> 4];
    out += digits[c & 15];
  };
  while (i < n) {
    unsigned char c = bytes[i];
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f)
        escape(c);
      else
        out += static_cast<char>(c);
      ++i;
      continue;
    }
    // The length of a well-formed UTF-8 sequence starting here, or 0.
    size_t length = c >= 0xc2 && c <= 0xdf   ? 2
                    : c >= 0xe0 && c <= 0xef ? 3
                    : c >= 0xf0 && c <= 0xf4 ? 4
                                             : 0;
    bool valid = length && i + length <= n;
    for (size_t k = 1; valid && k < length; ++k)
      valid = (bytes[i + k] & 0xc0) == 0x80;
    if (valid && length == 3) {
      // No overlong forms, no surrogates.
      valid = !(c == 0xe0 && bytes[i + 1] < 0xa0) &&
              !(c == 0xed && bytes[i + 1] >= 0xa0);
    } else if (valid && length == 4) {
      valid = !(c == 0xf0 && bytes[i + 1] < 0x90) &&
              !(c == 0xf4 && bytes[i + 1] >= 0x90);
    }
    if (!valid) {
      escape(c);
      ++i;
      continue;
    }
    out.append(text.data() + i, length);
    i += length;
  }
  return out;
}

OneLineDiagnosticHandler::OneLineDiagnosticHandler(MLIRContext *context,
                                                   StringRef tool,
                                                   Speller spell,
                                                   llvm::raw_ostream &os)
    : ScopedDiagnosticHandler(context) {
  std::string toolName = tool.str();
  setHandler([this, toolName, spell, &os](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error)
      ++numErrors;
    os << toolName << ": " << severityName(diag.getSeverity()) << ": "
       << describeDiagnostic(diag, spell) << "\n";
    os.flush();
    return success();
  });
}
