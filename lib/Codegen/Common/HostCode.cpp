//===- HostCode.cpp - the step's host code as a shared library -*- C++ -*-===//

#include "accrue/Codegen/Common/HostCode.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/ScalarEvolution.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/Transforms/Utils/LoopUtils.h"

#include <unistd.h>

using namespace mlir;
using namespace accrue;

namespace {

std::unique_ptr<llvm::TargetMachine>
createTargetMachine(const HostCodeOptions &options, std::string &error) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return nullptr;
  std::string cpuName = options.cpu;
  std::string features;
  if (cpuName == "host") {
    cpuName = llvm::sys::getHostCPUName().str();
    for (auto &feature : llvm::sys::getHostCPUFeatures())
      features += (feature.second ? "+" : "-") + feature.first().str() + ",";
  }
  llvm::CodeGenOptLevel level =
      options.optLevel >= 3   ? llvm::CodeGenOptLevel::Aggressive
      : options.optLevel == 0 ? llvm::CodeGenOptLevel::None
                              : llvm::CodeGenOptLevel::Default;
  // Constructors (a CUDA step registers its kernels in one) go in
  // .init_array, which the dynamic loader runs; .ctors would need crt files.
  llvm::TargetOptions targetOptions;
  targetOptions.UseInitArray = true;
  std::unique_ptr<llvm::TargetMachine> machine(
      target->createTargetMachine(triple, cpuName, features, targetOptions,
                                  llvm::Reloc::PIC_, std::nullopt, level));
  if (!machine)
    error = "cannot create a target machine for " + triple.str();
  return machine;
}

/// Asks LLVM's loop vectorizer for a whole 512-bit register of f32 lanes in
/// the loops that round to bf16 or widen from it, on a CPU with
/// AVX512-BF16. LLVM 22 prices those conversions as if done one element at a
/// time, so it vectorized --precision bf16's elementwise kernels 4 wide
/// (xmm), where vcvtneps2bf16 converts 16 floats at once. Only innermost
/// loops that carry no floating-point value (no sum whose order a wider
/// vector would change) get the hint; LLVM still checks that the loop can
/// be vectorized.
struct WidenBF16Loops : llvm::PassInfoMixin<WidenBF16Loops> {
  static constexpr unsigned kLanes = 16;

  static bool convertsBF16(const llvm::Loop &loop) {
    for (llvm::BasicBlock *block : loop.blocks())
      for (llvm::Instruction &inst : *block) {
        if (auto *trunc = llvm::dyn_cast<llvm::FPTruncInst>(&inst);
            trunc && trunc->getType()->getScalarType()->isBFloatTy())
          return true;
        if (auto *ext = llvm::dyn_cast<llvm::FPExtInst>(&inst);
            ext && ext->getSrcTy()->getScalarType()->isBFloatTy())
          return true;
      }
    return false;
  }

  static bool carriesFloats(const llvm::Loop &loop) {
    return llvm::any_of(loop.getHeader()->phis(), [](llvm::PHINode &phi) {
      return phi.getType()->isFPOrFPVectorTy();
    });
  }

  llvm::PreservedAnalyses run(llvm::Function &fn,
                              llvm::FunctionAnalysisManager &fam) {
    bool changed = false;
    for (llvm::Loop *loop :
         fam.getResult<llvm::LoopAnalysis>(fn).getLoopsInPreorder()) {
      if (!loop->isInnermost() || !convertsBF16(*loop) || carriesFloats(*loop))
        continue;
      // Fewer iterations than lanes: nothing to widen (and LLVM would
      // report the hinted loop it then leaves alone).
      unsigned trip = fam.getResult<llvm::ScalarEvolutionAnalysis>(fn)
                          .getSmallConstantTripCount(loop);
      if (trip != 0 && trip < kLanes)
        continue;
      llvm::addStringMetadataToLoop(loop, "llvm.loop.vectorize.width", kLanes);
      changed = true;
    }
    if (!changed)
      return llvm::PreservedAnalyses::all();
    llvm::PreservedAnalyses kept;
    kept.preserveSet<llvm::CFGAnalyses>();
    return kept;
  }
};

/// LLVM's default pipeline at `optLevel`, without loop unrolling: the
/// generated loop nests have small static trip counts, which LLVM otherwise
/// unrolls fully into megabytes of code at great compile-time cost, for
/// little gain. Vectorization stays on unless `vectorize` is false.
llvm::Error optimizeModule(llvm::Module &module, llvm::TargetMachine *machine,
                           unsigned optLevel, bool vectorize = true) {
  if (optLevel == 0)
    return llvm::Error::success();
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopUnrolling = false;
  tuning.LoopInterleaving = true;
  tuning.LoopVectorization = vectorize;
  tuning.SLPVectorization = vectorize;
  llvm::PassBuilder builder(machine, tuning);
  if (vectorize && machine &&
      machine->getMCSubtargetInfo()->checkFeatures("+avx512bf16"))
    builder.registerVectorizerStartEPCallback(
        [](llvm::FunctionPassManager &fpm, llvm::OptimizationLevel) {
          fpm.addPass(WidenBF16Loops());
        });
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::OptimizationLevel level = optLevel >= 3   ? llvm::OptimizationLevel::O3
                                  : optLevel == 2 ? llvm::OptimizationLevel::O2
                                                  : llvm::OptimizationLevel::O1;
  builder.buildPerModuleDefaultPipeline(level).run(module, mam);
  return llvm::Error::success();
}

/// Adds `_mlir_<name>(ptr args)` that loads each argument from args[i] and
/// calls `function`.
void addPackedWrapper(llvm::Function *function) {
  llvm::Module *module = function->getParent();
  llvm::LLVMContext &ctx = module->getContext();
  auto *ptrType = llvm::PointerType::get(ctx, 0);
  auto *wrapperType =
      llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptrType}, false);
  auto *wrapper =
      llvm::Function::Create(wrapperType, llvm::GlobalValue::ExternalLinkage,
                             "_mlir_" + function->getName(), module);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", wrapper));
  llvm::Value *args = wrapper->getArg(0);
  SmallVector<llvm::Value *> values;
  for (auto [i, param] : llvm::enumerate(function->args())) {
    llvm::Value *slot = b.CreateConstGEP1_64(ptrType, args, i);
    llvm::Value *pointer = b.CreateLoad(ptrType, slot);
    values.push_back(b.CreateLoad(param.getType(), pointer));
  }
  b.CreateCall(function, values);
  b.CreateRetVoid();
}

} // namespace

FailureOr<std::unique_ptr<llvm::Module>>
accrue::translateToLLVMIR(ModuleOp module, llvm::LLVMContext &context,
                          const HostCodeOptions &options) {
  // Functions that asked for a C interface get a packed entry point.
  SmallVector<std::string> entries;
  for (auto fn : module.getOps<LLVM::LLVMFuncOp>())
    if (fn->hasAttr("llvm.emit_c_interface") && !fn.isExternal() &&
        !fn.getName().starts_with("_mlir_ciface_"))
      entries.push_back(fn.getName().str());

  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, context);
  if (!llvmModule)
    return module.emitError("translation to LLVM IR failed");
  for (const std::string &name : entries)
    if (llvm::Function *fn = llvmModule->getFunction(name))
      addPackedWrapper(fn);

  std::string error;
  std::unique_ptr<llvm::TargetMachine> machine =
      createTargetMachine(options, error);
  if (!machine)
    return module.emitError(error);
  llvmModule->setTargetTriple(machine->getTargetTriple());
  llvmModule->setDataLayout(machine->createDataLayout());
  if (llvm::verifyModule(*llvmModule, &llvm::errs()))
    return module.emitError("generated LLVM IR does not verify");
  if (llvm::Error err = optimizeModule(*llvmModule, machine.get(),
                                       options.optLevel, options.llvmVectorize))
    return module.emitError("LLVM optimization failed: ")
           << llvm::toString(std::move(err));
  return llvmModule;
}

int64_t accrue::vectorRegisterBits(const HostCodeOptions &options) {
  std::string error;
  std::unique_ptr<llvm::TargetMachine> machine =
      createTargetMachine(options, error);
  if (!machine)
    return 128;
  const llvm::MCSubtargetInfo *info = machine->getMCSubtargetInfo();
  if (info->checkFeatures("+avx512f"))
    return 512;
  if (info->checkFeatures("+avx"))
    return 256;
  return 128;
}

std::optional<int64_t> accrue::l2CacheBytes(const HostCodeOptions &options) {
  if (options.cpu != "host")
    return std::nullopt;
#ifdef _SC_LEVEL2_CACHE_SIZE
  if (long bytes = sysconf(_SC_LEVEL2_CACHE_SIZE); bytes > 0)
    return bytes;
#endif
  return std::nullopt;
}

bool accrue::hasCPUFeature(const HostCodeOptions &options, StringRef feature) {
  std::string error;
  std::unique_ptr<llvm::TargetMachine> machine =
      createTargetMachine(options, error);
  return machine &&
         machine->getMCSubtargetInfo()->checkFeatures(("+" + feature).str());
}

LogicalResult accrue::writeObjectFile(llvm::Module &module,
                                      const HostCodeOptions &options,
                                      StringRef path, std::string &error) {
  std::unique_ptr<llvm::TargetMachine> machine =
      createTargetMachine(options, error);
  if (!machine)
    return failure();
  std::error_code ec;
  llvm::ToolOutputFile out(path, ec, llvm::sys::fs::OF_None);
  if (ec) {
    error = "cannot write '" + path.str() + "': " + ec.message();
    return failure();
  }
  llvm::legacy::PassManager pm;
  if (machine->addPassesToEmitFile(pm, out.os(), nullptr,
                                   llvm::CodeGenFileType::ObjectFile)) {
    error = "the target cannot emit object files";
    return failure();
  }
  pm.run(module);
  out.keep();
  return success();
}

LogicalResult accrue::linkSharedLibrary(StringRef objectPath,
                                        StringRef outputPath, StringRef lldPath,
                                        std::string &error) {
  SmallVector<StringRef> args{lldPath, "-shared",  "--as-needed",
                              "-o",    outputPath, objectPath};
  // The generated code calls libm (expf, tanhf, ...) and libc (malloc),
  // and its parallel loops libomp (found at run time through the rpath;
  // --as-needed drops it from a step without parallel loops).
  for (StringRef lib :
       {"/lib/x86_64-linux-gnu/libm.so.6", "/lib/x86_64-linux-gnu/libc.so.6"})
    if (llvm::sys::fs::exists(lib))
      args.push_back(lib);
  std::string rpath =
      "-rpath=" + llvm::sys::path::parent_path(ACCRUE_LIBOMP).str();
  args.push_back(ACCRUE_LIBOMP);
  args.push_back(rpath);
  // Conversions the target CPU has no instruction for are calls of
  // compiler-rt's builtins (f32 to bf16 without AVX512-BF16), linked in.
  args.push_back(ACCRUE_BUILTINS);
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(lldPath, args, std::nullopt, {}, 0, 0,
                                     &message);
  if (rc != 0) {
    error = "linking with '" + lldPath.str() + "' failed" +
            (message.empty() ? "" : ": " + message);
    return failure();
  }
  return success();
}

// compiler-rt's f32 to bf16 conversion (round to nearest even), linked
// into this library from the same archive compiled steps link: the JIT's
// code calls it where the CPU has no instruction for the conversion
// (without AVX512-BF16). Only its address is taken here.
extern "C" void __truncsfbf2();

FailureOr<std::unique_ptr<ExecutionEngine>>
accrue::createJIT(ModuleOp module, const HostCodeOptions &options) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  ExecutionEngineOptions engineOptions;
  unsigned optLevel = options.optLevel;
  // The options hold a function_ref: the callable must outlive create().
  auto transformer = [optLevel](llvm::Module *module) {
    return optimizeModule(*module, nullptr, optLevel);
  };
  engineOptions.transformer = transformer;
  // Parallel loops call libomp, which the JIT loads as a compiled step
  // links it.
  SmallVector<StringRef> libraries{ACCRUE_LIBOMP};
  engineOptions.sharedLibPaths = libraries;
  engineOptions.jitCodeGenOptLevel = options.optLevel >= 3
                                         ? llvm::CodeGenOptLevel::Aggressive
                                         : llvm::CodeGenOptLevel::Default;
  auto engine = ExecutionEngine::create(module, engineOptions);
  if (!engine)
    return module.emitError("JIT compilation failed: ")
           << llvm::toString(engine.takeError());
  (*engine)->registerSymbols([](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap symbols;
    symbols[interner("__truncsfbf2")] = {
        llvm::orc::ExecutorAddr::fromPtr(&__truncsfbf2),
        llvm::JITSymbolFlags::Exported};
    return symbols;
  });
  return std::move(*engine);
}
