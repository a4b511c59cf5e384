//===- accrue-compile.cpp - compile an ONNX model to a step -----*- C++ -*-===//
//
// Binds the compiler's settings (accrue::bindCompilerSettings) to
// command-line flags and calls accrue::compileModel.
//
//===----------------------------------------------------------------------===//

#include "accrue/Compiler/Compiler.h"
#include "accrue/Compiler/Diagnostics.h"
#include "accrue/Pipelines/Settings.h"

#include "accrue-runtime/Settings.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"

#include <csignal>
#include <deque>

using namespace llvm;

/// How this tool spells a setting: its flag (the output is `-o`).
static std::string flagFor(const std::string &setting) {
  return setting == "output" ? "-o" : accrue::settingFlag(setting);
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  // A file-size limit fails the write (reported, the temporary artifact
  // removed) instead of killing the process.
  std::signal(SIGXFSZ, SIG_IGN);
  // --mlir-print-debuginfo and friends, for --emit import|mlir.
  mlir::registerAsmPrinterCLOptions();
  // --mlir-timing and friends, to see where compile time goes.
  mlir::registerPassManagerCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();

  accrue::CompilerOptions options;
  accrue::SettingTable table;
  accrue::bindCompilerSettings(table, options);

  cl::OptionCategory category("accrue-compile options");
  cl::opt<std::string> model(cl::Positional, cl::desc("<model.onnx>"),
                             cl::Required, cl::cat(category));
  cl::opt<std::string> output("o",
                              cl::desc("Output artifact directory (or file "
                                       "for --emit import|linalg|mlir|llvm; "
                                       "- is stdout)"),
                              cl::Required, cl::cat(category));
  // One flag per setting; flags that default to true also have --no-X.
  struct Bound {
    const accrue::Setting *setting;
    std::unique_ptr<cl::opt<std::string>> value;
    std::unique_ptr<cl::opt<bool>> flag, negated;
  };
  std::vector<Bound> bound;
  // cl::opt keeps references to its name and help.
  std::deque<std::string> texts;
  auto keep = [&](std::string text) -> StringRef {
    return texts.emplace_back(std::move(text));
  };
  for (const accrue::Setting &setting : table.settings()) {
    StringRef name = keep(accrue::dashedSettingName(setting.name));
    std::string help = setting.help;
    if (!setting.choices.empty())
      help += " (" + join(setting.choices, ", ") + ")";
    Bound b{&setting, nullptr, nullptr, nullptr};
    if (setting.kind == accrue::Setting::Kind::Flag) {
      b.flag = std::make_unique<cl::opt<bool>>(name, cl::desc(keep(help)),
                                               cl::cat(category));
      if (setting.defaultTrue)
        b.negated = std::make_unique<cl::opt<bool>>(
            keep("no-" + name.str()),
            cl::desc(keep("Turn off --" + name.str())), cl::cat(category));
    } else if (!setting.implicitValue.empty()) {
      // `--name` alone means the implicit value; `--name=value` another.
      b.value = std::make_unique<cl::opt<std::string>>(
          name, cl::desc(keep(help)), cl::cat(category), cl::ValueOptional);
    } else {
      b.value = std::make_unique<cl::opt<std::string>>(
          name, cl::desc(keep(help)), cl::cat(category));
    }
    bound.push_back(std::move(b));
  }
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "Compile an ONNX model with a loss into an "
                              "accumulated training step\n");

  auto fail = [](const std::string &message) {
    errs() << "accrue-compile: error: "
           << accrue::renderSettings(message, flagFor) << "\n";
    return 1;
  };
  for (const Bound &b : bound) {
    std::optional<std::string> error;
    if (b.value && b.value->getNumOccurrences())
      error = b.setting->read(b.value->empty() ? b.setting->implicitValue
                                               : *b.value);
    else if (b.flag && b.flag->getNumOccurrences())
      error = b.setting->read(*b.flag ? "true" : "false");
    else if (b.negated && b.negated->getNumOccurrences())
      error = b.setting->read(*b.negated ? "false" : "true");
    else
      continue;
    if (error)
      return fail(*error);
  }
  options.import.modelPath = model;
  options.output = output;
  options.commandLineOptions = true;

  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  accrue::OneLineDiagnosticHandler diagnostics(&context, "accrue-compile",
                                               flagFor);
  accrue::CompileResult result;
  if (mlir::failed(accrue::compileModel(context, options, &result)))
    return 1;
  if (result.plan) {
    if (options.plan == "json")
      outs() << accrue::rt::memoryPlanJsonText(*result.plan) << "\n";
    else
      accrue::printMemoryPlan(outs(), *result.plan);
  }
  if (result.kernelReport) {
    if (options.kernelReport == "json")
      outs() << *result.kernelReport << "\n";
    else
      accrue::printKernelReport(outs(), *result.kernelReport);
  }
  return 0;
}
