//===- Compiler.cpp - the compiler's C API ----------------------*- C++ -*-===//
//
// include/accrue-c/Compiler.h: registration for MLIR hosts (MLIR's C API
// handles unwrapped to their C++ objects) and compilation with
// accrue-compile's settings table, diagnostics collected from a context of
// the call's own.
//
//===----------------------------------------------------------------------===//

#include "accrue-c/Compiler.h"

#include "accrue/Compiler/Compiler.h"
#include "accrue/Compiler/Diagnostics.h"
#include "accrue/InitAllDialects.h"
#include "accrue/InitAllPasses.h"
#include "accrue/Pipelines/Settings.h"

#include "accrue-runtime/Settings.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Pass.h"
#include "mlir/CAPI/Support.h"
#include "mlir/CAPI/Utils.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <mutex>
#include <new>

using namespace mlir;

struct AccrueCompileOptions {
  accrue::CompilerOptions options;
  accrue::SettingTable table;

  AccrueCompileOptions() { accrue::bindCompilerSettings(table, options); }
  // The table refers to `options`: no copies.
  AccrueCompileOptions(const AccrueCompileOptions &) = delete;
};

namespace {

/// Settings as this API spells them: their names.
std::string plainName(const std::string &name) { return name; }

int fail(AccrueError **error, const std::string &message) {
  if (error)
    *error = accrueErrorCreate(message.c_str());
  return -1;
}

} // namespace

extern "C" {

void accrueRegisterDialects(MlirDialectRegistry registry) {
  accrue::registerAllDialects(*unwrap(registry));
}

void accrueRegisterPasses(void) {
  static std::once_flag once;
  std::call_once(once, [] { accrue::registerAllPasses(); });
}

MlirLogicalResult accrueAddTrainPipeline(MlirOpPassManager passManager,
                                         MlirStringRef options,
                                         MlirStringCallback errorCallback,
                                         void *userData) {
  accrueRegisterPasses();
  std::string text = "accrue-train-pipeline";
  if (options.length)
    text += "{" + unwrap(options).str() + "}";
  return mlirOpPassManagerAddPipeline(
      passManager, mlirStringRefCreate(text.data(), text.size()), errorCallback,
      userData);
}

AccrueCompileOptions *accrueCompileOptionsCreate(void) {
  return new (std::nothrow) AccrueCompileOptions();
}

void accrueCompileOptionsDestroy(AccrueCompileOptions *options) {
  delete options;
}

int accrueCompileOptionsSet(AccrueCompileOptions *options, const char *name,
                            const char *value, AccrueError **error) {
  if (!options || !name || !value)
    return fail(error, "a setting needs a name and a value");
  if (std::optional<std::string> message = options->table.read(name, value))
    return fail(error, accrue::renderSettings(*message, plainName));
  return 0;
}

/// One options struct whose table lists the settings.
static const AccrueCompileOptions &settingsCatalog() {
  static const AccrueCompileOptions *catalog = new AccrueCompileOptions();
  return *catalog;
}

int accrueCompileOptionsNumSettings(void) {
  return static_cast<int>(settingsCatalog().table.settings().size());
}

const char *accrueCompileOptionsSettingName(int index) {
  if (index < 0 || index >= accrueCompileOptionsNumSettings())
    return nullptr;
  return settingsCatalog().table.settings()[index].name.c_str();
}

int accrueCompileOptionsSettingIsFlag(int index) {
  if (index < 0 || index >= accrueCompileOptionsNumSettings())
    return 0;
  return settingsCatalog().table.settings()[index].kind ==
         accrue::Setting::Kind::Flag;
}

int accrueCompile(const char *modelPath, const char *output,
                  const AccrueCompileOptions *options,
                  AccrueDiagnosticCallback callback, void *userData,
                  AccrueError **error) {
  if (!modelPath || !output || !options)
    return fail(error, "compiling needs a model, an output and options");
  accrue::CompilerOptions compile = options->options;
  compile.import.modelPath = modelPath;
  compile.output = output;
  MLIRContext context(MLIRContext::Threading::DISABLED);
  std::string firstError;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    std::string message = accrue::describeDiagnostic(diag, plainName);
    if (diag.getSeverity() == DiagnosticSeverity::Error && firstError.empty())
      firstError = message;
    if (callback)
      callback(accrue::severityName(diag.getSeverity()), message.c_str(),
               userData);
    return success();
  });
  try {
    if (succeeded(accrue::compileModel(context, compile)))
      return 0;
  } catch (const std::exception &e) {
    return fail(error, e.what());
  }
  return fail(error, firstError.empty() ? "compilation failed" : firstError);
}

int accrueCompileBytes(const void *bytes, size_t size, const char *output,
                       const AccrueCompileOptions *options,
                       AccrueDiagnosticCallback callback, void *userData,
                       AccrueError **error) {
  if (!bytes)
    return fail(error, "no model bytes given");
  // The importer reads files: the bytes go to a private temporary one.
  llvm::SmallString<128> path;
  int fd;
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile("accrue-model", "onnx", fd, path))
    return fail(error, "cannot create a temporary file: " + ec.message());
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os.write(static_cast<const char *>(bytes), size);
    os.close();
    if (os.has_error()) {
      llvm::sys::fs::remove(path);
      return fail(error,
                  "cannot write the temporary model: " + os.error().message());
    }
  }
  int status =
      accrueCompile(path.c_str(), output, options, callback, userData, error);
  llvm::sys::fs::remove(path);
  return status;
}

} // extern "C"
