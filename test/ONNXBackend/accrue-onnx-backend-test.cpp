//===- accrue-onnx-backend-test.cpp - ONNX's node tests ---------*- C++ -*-===//
//
// Runs ONNX's own backend node tests (a directory per test: model.onnx and
// test_data_set_*/{input,output}_*.pb) through Accrue: every test whose
// operators the importer supports is imported in inference mode, lowered for
// the CPU, JIT-compiled, run on its inputs and compared with its stored
// outputs. Prints each failure and skip, then "N passed, N failed, N
// skipped"; exits non-zero when anything failed.
//
//===----------------------------------------------------------------------===//

#include "accrue-runtime/Runtime.h"
#include "accrue/Codegen/Common/HostCode.h"
#include "accrue/Compiler/Diagnostics.h"
#include "accrue/Import/ONNX/Importer.h"
#include "accrue/InitAllDialects.h"
#include "accrue/Pipelines/Pipelines.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/raw_ostream.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>

using namespace mlir;
using namespace accrue;
using llvm::StringRef;

namespace {

llvm::cl::opt<std::string>
    dataDir(llvm::cl::Positional, llvm::cl::desc("<node test directory>"),
            llvm::cl::init("/usr/share/libonnx-testdata/data/node"));
llvm::cl::opt<std::string>
    filter("filter", llvm::cl::desc("Only tests matching this regex"),
           llvm::cl::init(""));
llvm::cl::opt<bool> verbose("v", llvm::cl::desc("Print passing tests too"));
llvm::cl::opt<double> rtol("rtol", llvm::cl::desc("Relative tolerance"),
                           llvm::cl::init(1e-4));
llvm::cl::opt<double> atol("atol", llvm::cl::desc("Absolute tolerance"),
                           llvm::cl::init(1e-5));

enum class Outcome { Pass, Fail, Skip };

struct Result {
  Outcome outcome;
  std::string reason;
};

/// Reads a .pb tensor. ONNX's tests store bfloat16 data as uint16 (numpy
/// has no bfloat16): reinterpret it when the model's value is bfloat16.
FailureOr<onnx_import::TensorData>
readTensorFile(StringRef path, MLIRContext *context, bool bfloat16) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  onnx::TensorProto tensor;
  if (!buffer || !tensor.ParseFromArray((*buffer)->getBufferStart(),
                                        (*buffer)->getBufferSize()))
    return failure();
  if (bfloat16 && tensor.data_type() == onnx::TensorProto::UINT16)
    tensor.set_data_type(onnx::TensorProto::BFLOAT16);
  std::string bytes;
  tensor.SerializeToString(&bytes);
  return onnx_import::readTensorProtoBytes(bytes, context,
                                           UnknownLoc::get(context));
}

std::string readFile(StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  return buffer ? (*buffer)->getBuffer().str() : std::string();
}

/// Element `i` of a tensor as a double.
double elementAt(const onnx_import::TensorData &t, int64_t i) {
  Type type = t.elementType;
  const char *p = t.bytes.data();
  auto read = [&](auto sample) {
    decltype(sample) v;
    std::memcpy(&v, p + i * sizeof(v), sizeof(v));
    return static_cast<double>(v);
  };
  if (type.isF32())
    return read(float());
  if (type.isF64())
    return read(double());
  if (type.isInteger(64))
    return read(int64_t());
  if (type.isInteger(32))
    return read(int32_t());
  if (type.isInteger(1))
    return p[i] ? 1.0 : 0.0;
  uint16_t bits;
  std::memcpy(&bits, p + 2 * i, 2);
  uint32_t wide;
  if (type.isBF16()) {
    wide = uint32_t(bits) << 16;
  } else { // f16
    llvm::APFloat f(llvm::APFloat::IEEEhalf(), llvm::APInt(16, bits));
    return f.convertToDouble();
  }
  float f;
  std::memcpy(&f, &wide, 4);
  return f;
}

/// Compares one output; returns an empty string when it matches.
std::string compare(StringRef name, const onnx_import::TensorData &expected,
                    const std::string &actualBytes, Type actualType,
                    llvm::ArrayRef<int64_t> actualShape) {
  if (llvm::ArrayRef<int64_t>(expected.shape) != actualShape) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << "output '" << name << "' has shape [";
    llvm::interleaveComma(actualShape, os);
    os << "], expected [";
    llvm::interleaveComma(expected.shape, os);
    os << "]";
    return s;
  }
  if (expected.elementType != actualType) {
    std::string s;
    llvm::raw_string_ostream(s)
        << "output '" << name << "' has element type " << actualType
        << ", expected " << expected.elementType;
    return s;
  }
  onnx_import::TensorData actual{actualType, expected.shape, actualBytes};
  bool isFloat = isa<FloatType>(actualType);
  // An output of 16-bit floats is compared at its type's resolution: two
  // units in the last place (a relative 2^-6 for bf16, torch.testing's
  // 1.6e-2; 2^-9 for f16). A function body computes in that type, rounding
  // each step, and a reference rounds in its own places: ONNX's expanded
  // Attention in f16 gives 0.46899 where its stored output is 0.46948 and
  // the float64 value 0.46919 (2 ulps apart, each about 1 from the truth).
  double relative = rtol;
  if (actualType.isBF16())
    relative = std::max(rtol.getValue(), std::ldexp(1.0, -6));
  else if (actualType.isF16())
    relative = std::max(rtol.getValue(), std::ldexp(1.0, -9));
  for (int64_t i = 0; i < expected.numElements(); ++i) {
    double a = elementAt(actual, i), e = elementAt(expected, i);
    bool ok = isFloat ? (std::isnan(a) && std::isnan(e)) ||
                            (std::isinf(e) && a == e) ||
                            std::abs(a - e) <= atol + relative * std::abs(e)
                      : a == e;
    if (!ok) {
      std::string s;
      llvm::raw_string_ostream(s) << "output '" << name << "' element " << i
                                  << " is " << a << ", expected " << e;
      return s;
    }
  }
  return "";
}

/// Tests whose stored outputs disagree with the operator's current
/// definition, with the reason.
const llvm::StringMap<StringRef> &knownDisagreements() {
  static const llvm::StringMap<StringRef> tests = {
      {"test_cast_FLOAT_to_BFLOAT16",
       "ONNX 1.12's test data truncates to bfloat16; Accrue rounds to "
       "nearest even like ONNX >= 1.14 and PyTorch"},
      {"test_castlike_FLOAT_to_BFLOAT16_expanded",
       "ONNX 1.12's test data truncates to bfloat16; Accrue rounds to "
       "nearest even like ONNX >= 1.14 and PyTorch"},
      {"test_castlike_FLOAT_to_BFLOAT16",
       "the stored outputs (ONNX 1.12 and 1.16) truncate to bfloat16; "
       "Accrue rounds to nearest even like PyTorch"},
      {"test_averagepool_2d_ceil_last_window_starts_on_pad",
       "the stored outputs (ONNX 1.23) are rounded to 4 decimals, within "
       "ONNX's own rtol of 1e-3 but not this tool's 1e-4: 0.1511 for "
       "(0.8580 + 0.0786 + 0.2692 + 0.1537) / 9 = 0.151056, which Accrue "
       "computes (onnx/backend/test/case/node/averagepool.py)"},
      {"test_adam_multiple",
       "the stored outputs were computed with epsilon = 1e-2, which the node "
       "does not set (the operator's default is 1e-6; "
       "onnx/backend/test/case/node/adam.py)"},
  };
  return tests;
}

/// The error lines of a test's diagnostics: a warning (a model importing a
/// newer opset than Accrue knows, which still compiles) or a remark is not
/// a failure's reason (all the lines are, where there are no others).
std::string errorsOf(StringRef diagnostics) {
  SmallVector<StringRef> lines;
  diagnostics.split(lines, '\n', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  std::string errors;
  for (StringRef line : lines) {
    if (line.contains(": warning: ") || line.contains(": remark: "))
      continue;
    if (!errors.empty())
      errors += "\n";
    errors += line.trim().str();
  }
  return errors.empty() ? diagnostics.trim().str() : errors;
}

Result runTest(StringRef dir) {
  auto known = knownDisagreements().find(llvm::sys::path::filename(dir));
  if (known != knownDisagreements().end())
    return {Outcome::Skip, known->second.str()};
  SmallString<256> modelPath(dir);
  llvm::sys::path::append(modelPath, "model.onnx");
  std::string bytes = readFile(modelPath);
  onnx::ModelProto model;
  if (bytes.empty() || !model.ParseFromString(bytes))
    return {Outcome::Skip, "unreadable model"};
  llvm::StringMap<int64_t> opsets;
  for (const auto &o : model.opset_import())
    opsets[o.domain() == "ai.onnx" ? "" : o.domain()] = o.version();
  for (const auto &node : model.graph().node()) {
    std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
    if (!onnx_import::isSupportedOperator(domain, node.op_type(),
                                          opsets.lookup(domain)))
      return {Outcome::Skip,
              "op " + (domain.empty() ? "" : domain + ".") + node.op_type()};
  }

  MLIRContext context(MLIRContext::Threading::DISABLED);
  DialectRegistry registry;
  registerAllDialects(registry);
  context.appendDialectRegistry(registry);
  std::string diagnostics;
  llvm::raw_string_ostream diagStream(diagnostics);
  OneLineDiagnosticHandler handler(&context, "import", settingFlag, diagStream);

  // The first data set's inputs, by graph input name: those that feed
  // constant operands (shapes, axes, ...) are compiled in as constants.
  std::vector<std::string> graphInputs;
  llvm::StringSet<> initializerNames, bfloat16Inputs;
  for (const auto &init : model.graph().initializer())
    initializerNames.insert(init.name());
  for (const auto &input : model.graph().input())
    if (!initializerNames.contains(input.name())) {
      graphInputs.push_back(input.name());
      if (input.type().tensor_type().elem_type() == onnx::TensorProto::BFLOAT16)
        bfloat16Inputs.insert(input.name());
    }
  std::map<std::string, std::string> inputBytes;
  {
    SmallString<256> firstSet(dir);
    llvm::sys::path::append(firstSet, "test_data_set_0");
    for (auto [i, name] : llvm::enumerate(graphInputs)) {
      std::string bytes =
          readFile((firstSet + "/input_" + llvm::Twine(i) + ".pb").str());
      // bfloat16 data stored as uint16 (see readTensorFile).
      onnx::TensorProto tensor;
      if (bfloat16Inputs.contains(name) && tensor.ParseFromString(bytes) &&
          tensor.data_type() == onnx::TensorProto::UINT16) {
        tensor.set_data_type(onnx::TensorProto::BFLOAT16);
        tensor.SerializeToString(&bytes);
      }
      inputBytes[name] = bytes;
    }
  }

  onnx_import::ImportOptions options;
  options.mode = onnx_import::ImportMode::Inference;
  options.modelPath = modelPath.str().str();
  options.inputValues = inputBytes;
  FailureOr<onnx_import::ImportedModel> imported =
      onnx_import::importModel(&context, bytes, options);
  if (failed(imported)) {
    // Documented limitations (element types, 3-D windows, random training
    // Dropout, op outputs Accrue does not model) are skips with their
    // reason; anything else is a failure.
    std::string message = errorsOf(diagnostics);
    if (StringRef(message).contains("unsupported element type") ||
        StringRef(message).contains("not supported"))
      return {Outcome::Skip, message};
    return {Outcome::Fail, message};
  }
  ModuleOp module = *imported->module;
  // The function is lowered to LLVM below; keep its result types.
  SmallVector<Type> resultTypes(
      imported->forward.getFunctionType().getResults());
  PassManager pm(&context);
  CompileOptions compile;
  buildCompilePipeline(pm, compile);
  if (failed(pm.run(module)))
    return {Outcome::Fail, "compilation failed: " + errorsOf(diagnostics)};
  FailureOr<std::unique_ptr<ExecutionEngine>> engine =
      createJIT(module, HostCodeOptions());
  if (failed(engine))
    return {Outcome::Fail, "JIT failed: " + errorsOf(diagnostics)};

  int sets = 0;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    StringRef setDir = it->path();
    if (!llvm::sys::path::filename(setDir).starts_with("test_data_set_"))
      continue;
    ++sets;
    std::vector<onnx_import::TensorData> inputs;
    for (const onnx_import::ImportedInput &input : imported->inputs) {
      size_t i = llvm::find(graphInputs, input.name) - graphInputs.begin();
      FailureOr<onnx_import::TensorData> t =
          readTensorFile((setDir + "/input_" + llvm::Twine(i) + ".pb").str(),
                         &context, input.dtype == "bf16");
      if (failed(t))
        return {Outcome::Fail, "cannot read input '" + input.name + "'"};
      inputs.push_back(std::move(*t));
    }
    rt::PackedArgs args;
    for (onnx_import::TensorData &t : inputs)
      args.addMemref(t.bytes.data(),
                     std::vector<int64_t>(t.shape.begin(), t.shape.end()));
    std::vector<std::string> outputs;
    for (Type type : resultTypes) {
      auto tensor = cast<RankedTensorType>(type);
      int64_t width = tensor.getElementType().isInteger(1)
                          ? 1
                          : tensor.getElementTypeBitWidth() / 8;
      outputs.emplace_back(tensor.getNumElements() * width, '\0');
    }
    for (auto [buffer, type] : llvm::zip(outputs, resultTypes))
      args.addMemref(
          buffer.data(),
          std::vector<int64_t>(cast<RankedTensorType>(type).getShape().begin(),
                               cast<RankedTensorType>(type).getShape().end()));
    if (llvm::Error err = (*engine)->invokePacked(
            "forward", llvm::MutableArrayRef<void *>(args.data(), args.size())))
      return {Outcome::Fail,
              "invocation failed: " + llvm::toString(std::move(err))};
    for (auto [i, type] : llvm::enumerate(resultTypes)) {
      FailureOr<onnx_import::TensorData> expected = readTensorFile(
          (setDir + "/output_" + llvm::Twine(i) + ".pb").str(), &context,
          cast<RankedTensorType>(type).getElementType().isBF16());
      if (failed(expected))
        return {Outcome::Fail, "cannot read output " + std::to_string(i)};
      auto tensor = cast<RankedTensorType>(type);
      std::string mismatch =
          compare(imported->outputs[i].name, *expected, outputs[i],
                  tensor.getElementType(), tensor.getShape());
      if (!mismatch.empty())
        return {Outcome::Fail,
                llvm::sys::path::filename(setDir).str() + ": " + mismatch};
    }
  }
  if (sets == 0)
    return {Outcome::Skip, "no test data"};
  return {Outcome::Pass, ""};
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::cl::ParseCommandLineOptions(argc, argv, "Run ONNX's node tests\n");
  std::optional<llvm::Regex> regex;
  if (!filter.empty())
    regex.emplace(filter);

  std::vector<std::string> tests;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dataDir, ec), end; !ec && it != end;
       it.increment(ec))
    if (!regex || regex->match(llvm::sys::path::filename(it->path())))
      tests.push_back(it->path());
  if (ec || tests.empty()) {
    llvm::errs() << "accrue-onnx-backend-test: no tests in '" << dataDir
                 << "'\n";
    return 2;
  }
  llvm::sort(tests);

  int passed = 0, failed = 0, skipped = 0;
  for (const std::string &dir : tests) {
    StringRef name = llvm::sys::path::filename(dir);
    Result r = runTest(dir);
    switch (r.outcome) {
    case Outcome::Pass:
      ++passed;
      if (verbose)
        llvm::outs() << "PASS " << name << "\n";
      break;
    case Outcome::Fail:
      ++failed;
      llvm::outs() << "FAIL " << name << ": " << r.reason << "\n";
      break;
    case Outcome::Skip:
      ++skipped;
      llvm::outs() << "SKIP " << name << ": " << r.reason << "\n";
      break;
    }
    llvm::outs().flush();
  }
  llvm::outs() << passed << " passed, " << failed << " failed, " << skipped
               << " skipped\n";
  return failed ? 1 : 0;
}
