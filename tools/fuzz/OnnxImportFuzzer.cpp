//===- OnnxImportFuzzer.cpp - the ONNX importer on arbitrary bytes -*- C++ -*-//
//
// Models come from strangers: any bytes are imported twice (training and
// inference mode) and either give a module that verifies, and in training
// mode a train step that verifies, or are refused with one diagnostic. A
// crash, an assertion, a sanitizer report or a module that does not verify
// is a finding.
//
//===----------------------------------------------------------------------===//

#include "Fuzz.h"

#include "accrue/Dialect/Train/Utils/StepBuilder.h"
#include "accrue/Import/ONNX/Importer.h"
#include "accrue/InitAllDialects.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <cstdlib>
#include <memory>

using namespace mlir;
using namespace accrue;

namespace {

/// A context with every dialect loaded, renewed now and then so that what
/// it uniques (types, attributes, constants) does not grow without bound.
MLIRContext &context() {
  static std::unique_ptr<MLIRContext> ctx;
  static unsigned uses = 0;
  if (!ctx || ++uses % 256 == 0) {
    DialectRegistry registry;
    registerAllDialects(registry);
    ctx = std::make_unique<MLIRContext>(registry);
    ctx->loadAllAvailableDialects();
    ctx->disableMultithreading();
  }
  return *ctx;
}

void importOnce(MLIRContext &ctx, StringRef bytes,
                onnx_import::ImportMode mode) {
  onnx_import::ImportOptions options;
  options.mode = mode;
  options.microBatch = 2;
  // External data resolves against a folder that does not exist.
  options.modelPath = "/nonexistent/accrue-fuzz/model.onnx";
  FailureOr<onnx_import::ImportedModel> model =
      onnx_import::importModel(&ctx, bytes, options);
  if (failed(model))
    return;
  if (failed(verify(*model->module)))
    std::abort();
  if (mode != onnx_import::ImportMode::Training)
    return;
  train::StepOptions step;
  step.microBatch = options.microBatch;
  if (succeeded(train::buildTrainStep(*model->module, model->forward, step)) &&
      failed(verify(*model->module)))
    std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  MLIRContext &ctx = context();
  // Refusals are the expected outcome for most inputs: keep them quiet.
  ScopedDiagnosticHandler quiet(&ctx, [](Diagnostic &) { return success(); });
  StringRef bytes(reinterpret_cast<const char *>(data), size);
  importOnce(ctx, bytes, onnx_import::ImportMode::Training);
  importOnce(ctx, bytes, onnx_import::ImportMode::Inference);
  return 0;
}
