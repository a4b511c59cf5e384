//===- KernelReportText.cpp - the report as JSON and text ------*- C++ -*-===//
//
// KernelReport::toJson (what step.json records), the table and warnings
// accrue-compile --kernel-report prints, and the cuda-kernel-report pass.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/CUDA/KernelReport.h"
#include "accrue/Codegen/CUDA/Passes.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>

namespace accrue::cuda {
#define GEN_PASS_DEF_CUDAKERNELREPORT
#include "accrue/Codegen/CUDA/Passes.h.inc"
} // namespace accrue::cuda

using namespace mlir;
using namespace accrue;
using namespace accrue::cuda;

//===----------------------------------------------------------------------===//
// JSON and text
//===----------------------------------------------------------------------===//

namespace {

/// Ceilings worth a line in the text report.
constexpr int64_t kSerialOpsCeiling = 8192;
constexpr int64_t kLargeFootprint = 1 << 20;
constexpr double kEfficiencyFloor = 0.8;

llvm::json::Value optional(std::optional<int64_t> v) {
  return v ? llvm::json::Value(*v) : llvm::json::Value(nullptr);
}

llvm::json::Value optional(std::optional<double> v) {
  return v ? llvm::json::Value(std::round(*v * 1000) / 1000)
           : llvm::json::Value(nullptr);
}

} // namespace

llvm::json::Value KernelReport::toJson() const {
  int64_t k = accumulationSteps;
  llvm::json::Array kernelsJson, gemmsJson;
  int64_t kernelsPerMicroBatch = 0, kernelsPerStep = 0, gemmsPerMicroBatch = 0,
          gemmsPerStep = 0, thinGemms = 0, biasEpilogues = 0, singleThread = 0,
          singleThreadLoops = 0, maxOps = 0, footprintPerMicroBatch = 0,
          footprintPerStep = 0, parameterDividing = 0,
          invariantPerMicroBatch = 0;
  std::optional<double> worstLarge;
  for (const KernelInfo &kernel : kernels) {
    kernelsPerMicroBatch += kernel.launchesPerMicroBatch;
    kernelsPerStep += kernel.launchesPerStep(k);
    int64_t footprint = kernel.footprintBytes();
    footprintPerMicroBatch += kernel.launchesPerMicroBatch * footprint;
    footprintPerStep += kernel.launchesPerStep(k) * footprint;
    maxOps = std::max(maxOps, kernel.memoryOpsPerThread);
    parameterDividing += kernel.parameterDivisions > 0;
    invariantPerMicroBatch +=
        kernel.loopInvariant ? kernel.launchesPerMicroBatch : 0;
    if (kernel.threads() == 1) {
      ++singleThread;
      singleThreadLoops += kernel.tripCount > 1;
    }
    std::optional<double> efficiency = kernel.sectorEfficiency();
    if (footprint > kLargeFootprint && efficiency)
      worstLarge =
          worstLarge ? std::min(*worstLarge, *efficiency) : *efficiency;
    llvm::json::Array accesses;
    for (const KernelAccess &access : kernel.accesses) {
      llvm::json::Object a{
          {"buffer", access.buffer},
          {"op", access.store ? "store" : "load"},
          {"element_bytes", access.elementBytes},
          {"access_bytes", access.accessBytes},
          {"pattern", accessPatternName(access.pattern)},
          {"thread_stride_bytes", optional(access.threadStrideBytes)},
          {"sectors_per_request", optional(access.sectorsPerRequest)},
          {"active_lanes", access.activeLanes},
          {"sector_efficiency", optional(access.sectorEfficiency())},
          {"executions_per_thread", access.executions},
          {"footprint_bytes", access.footprintBytes}};
      if (!access.parameter.empty())
        a["parameter"] = access.parameter;
      accesses.push_back(std::move(a));
    }
    kernelsJson.push_back(llvm::json::Object{
        {"name", kernel.name},
        {"node", kernel.node},
        {"launches_per_micro_batch", kernel.launchesPerMicroBatch},
        {"launches_per_step", kernel.launchesPerStep(k)},
        {"grid",
         llvm::json::Array{kernel.grid[0], kernel.grid[1], kernel.grid[2]}},
        {"block",
         llvm::json::Array{kernel.block[0], kernel.block[1], kernel.block[2]}},
        {"threads", kernel.threads()},
        {"trip_count", kernel.tripCount},
        {"unknown_trip_count", kernel.unknownTrip},
        {"grid_stride", kernel.gridStride},
        {"loop_invariant", kernel.loopInvariant},
        {"memory_ops_per_thread", kernel.memoryOpsPerThread},
        {"parameter_divisions", kernel.parameterDivisions},
        {"footprint_bytes", footprint},
        {"sector_efficiency", optional(efficiency)},
        {"accesses", std::move(accesses)}});
  }
  for (const GemmCall &gemm : gemms) {
    gemmsPerMicroBatch += gemm.launchesPerMicroBatch;
    gemmsPerStep += gemm.launchesPerStep(k);
    thinGemms += gemm.m == 1 || gemm.n == 1;
    if (gemm.epilogue != "none")
      biasEpilogues += gemm.launchesPerMicroBatch;
    gemmsJson.push_back(llvm::json::Object{
        {"node", gemm.node},
        {"m", gemm.m},
        {"n", gemm.n},
        {"k", gemm.k},
        {"batch", gemm.batch},
        {"input_type", gemm.inputType},
        {"multiply_type", gemm.multiplyType},
        {"output_type", gemm.outputType},
        {"epilogue", gemm.epilogue},
        {"launches_per_micro_batch", gemm.launchesPerMicroBatch},
        {"launches_per_step", gemm.launchesPerStep(k)}});
  }
  return llvm::json::Object{
      {"accumulation_steps", k},
      {"totals",
       llvm::json::Object{
           {"kernels", int64_t(kernels.size())},
           {"kernels_per_micro_batch", kernelsPerMicroBatch},
           {"kernels_per_step", kernelsPerStep},
           {"gemm_calls_per_micro_batch", gemmsPerMicroBatch},
           {"gemm_calls_per_step", gemmsPerStep},
           {"gemms_with_m_or_n_1", thinGemms},
           {"bias_gradient_epilogues_per_micro_batch", biasEpilogues},
           {"single_thread_kernels", singleThread},
           {"single_thread_kernels_with_loops", singleThreadLoops},
           {"max_memory_ops_per_thread", maxOps},
           {"kernels_dividing_by_parameters", parameterDividing},
           {"loop_invariant_kernels_per_micro_batch", invariantPerMicroBatch},
           {"footprint_bytes_per_micro_batch", footprintPerMicroBatch},
           {"footprint_bytes_per_step", footprintPerStep},
           {"worst_sector_efficiency_over_1mb", optional(worstLarge)}}},
      {"kernels", std::move(kernelsJson)},
      {"gemms", std::move(gemmsJson)}};
}

std::string cuda::renderKernelReport(const llvm::json::Value &value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  const llvm::json::Object &report = *value.getAsObject();
  const llvm::json::Object &totals = *report.getObject("totals");
  auto integer = [](const llvm::json::Object &o, StringRef key) {
    return o.getInteger(key).value_or(0);
  };
  auto megabytes = [](int64_t bytes) {
    return std::string(llvm::formatv("{0:F1} MB", bytes / 1e6));
  };
  os << llvm::formatv(
      "kernel report ({0} micro-batches per step): {1} kernels; per "
      "micro-batch {2} launches and {3} GEMM calls, per step {4} and {5}\n",
      integer(report, "accumulation_steps"), integer(totals, "kernels"),
      integer(totals, "kernels_per_micro_batch"),
      integer(totals, "gemm_calls_per_micro_batch"),
      integer(totals, "kernels_per_step"),
      integer(totals, "gemm_calls_per_step"));
  os << llvm::formatv(
      "  kernel footprint {0} per micro-batch, {1} per step; at most {2} "
      "memory operations in one thread; {3} kernels divide by parameters\n",
      megabytes(integer(totals, "footprint_bytes_per_micro_batch")),
      megabytes(integer(totals, "footprint_bytes_per_step")),
      integer(totals, "max_memory_ops_per_thread"),
      integer(totals, "kernels_dividing_by_parameters"));
  if (const llvm::json::Object *ptx = report.getObject("ptx_totals")) {
    os << llvm::formatv(
        "  PTX ({0}): {1} kernels divide by parameters, {2} "
        "one-thread kernels loop, {3} streaming kernels "
        "lack 16-byte accesses",
        ptx->getString("arch").value_or("?"),
        integer(*ptx, "kernels_dividing_by_parameters"),
        integer(*ptx, "single_thread_kernels_with_loops"),
        integer(*ptx, "streaming_kernels_without_16_byte_accesses"));
    if (std::optional<StringRef> ptxas = ptx->getString("ptxas"))
      os << "; no ptxas figures (" << *ptxas << ")\n";
    else
      os << llvm::formatv("; ptxas: at most {0} registers, {1} kernels "
                          "spill, lowest theoretical occupancy {2:P0}\n",
                          integer(*ptx, "max_registers"),
                          integer(*ptx, "kernels_spilling"),
                          ptx->getNumber("lowest_occupancy").value_or(0));
  }

  // The kernels that move the most bytes per step.
  std::vector<const llvm::json::Object *> kernels;
  for (const llvm::json::Value &entry : *report.getArray("kernels"))
    kernels.push_back(entry.getAsObject());
  auto bytesPerStep = [&](const llvm::json::Object *kernel) {
    return integer(*kernel, "footprint_bytes") *
           integer(*kernel, "launches_per_step");
  };
  std::vector<const llvm::json::Object *> heaviest = kernels;
  std::stable_sort(heaviest.begin(), heaviest.end(), [&](auto *l, auto *r) {
    return bytesPerStep(l) > bytesPerStep(r);
  });
  constexpr size_t kRows = 25;
  os << llvm::formatv("{0,-44} {1,8} {2,12} {3,10} {4,12} {5,7}\n", "kernel",
                      "per step", "grid x block", "ops/thread", "bytes/step",
                      "sectors");
  for (const llvm::json::Object *kernel :
       ArrayRef(heaviest).take_front(kRows)) {
    const llvm::json::Array &grid = *kernel->getArray("grid"),
                            &block = *kernel->getArray("block");
    std::string shape = llvm::formatv("{0}x{1}", *grid[0].getAsInteger(),
                                      *block[0].getAsInteger());
    std::optional<double> efficiency = kernel->getNumber("sector_efficiency");
    os << llvm::formatv(
        "{0,-44} {1,8} {2,12} {3,10} {4,12} {5,7}\n",
        StringRef(*kernel->getString("name")).take_front(44),
        integer(*kernel, "launches_per_step"), shape,
        integer(*kernel, "memory_ops_per_thread"), bytesPerStep(kernel),
        efficiency ? std::string(llvm::formatv("{0:P0}", *efficiency)) : "-");
  }
  if (heaviest.size() > kRows)
    os << llvm::formatv("... {0} more (--kernel-report=json lists every "
                        "kernel and access)\n",
                        heaviest.size() - kRows);

  // What looks slow, in kernel order.
  for (const llvm::json::Object *kernel : kernels) {
    StringRef name = *kernel->getString("name");
    int64_t ops = integer(*kernel, "memory_ops_per_thread");
    int64_t threads = integer(*kernel, "threads");
    const llvm::json::Array &grid = *kernel->getArray("grid");
    if (threads == 1 && integer(*kernel, "trip_count") > 1)
      os << llvm::formatv("warning: {0} runs a loop of {1} memory operations "
                          "in one thread\n",
                          name, ops);
    else if (ops > kSerialOpsCeiling)
      os << llvm::formatv("warning: {0} runs {1} memory operations in one "
                          "thread (more than {2})\n",
                          name, ops, kSerialOpsCeiling);
    else if (threads > 1 && *grid[0].getAsInteger() == 1 &&
             kernel->getBoolean("grid_stride").value_or(false) &&
             integer(*kernel, "trip_count") > 1)
      os << llvm::formatv("warning: {0} strides over a grid of one block "
                          "({1} threads, {2} iterations each)\n",
                          name, threads, integer(*kernel, "trip_count"));
    if (kernel->getBoolean("loop_invariant").value_or(false))
      os << llvm::formatv("warning: {0} recomputes the same values in every "
                          "micro-batch (it reads only parameters and "
                          "constants)\n",
                          name);
    if (const llvm::json::Object *ptx = kernel->getObject("ptx")) {
      if (integer(*ptx, "spill_bytes") > 0)
        os << llvm::formatv("warning: {0} spills {1} bytes of registers\n",
                            name, integer(*ptx, "spill_bytes"));
      if (kernel->getBoolean("grid_stride").value_or(false) &&
          integer(*ptx, "widest_global_access") < 16)
        os << llvm::formatv("warning: {0} streams with {1}-byte accesses "
                            "(not 16)\n",
                            name, integer(*ptx, "widest_global_access"));
    }
    std::optional<double> efficiency = kernel->getNumber("sector_efficiency");
    if (integer(*kernel, "footprint_bytes") > kLargeFootprint && efficiency &&
        *efficiency < kEfficiencyFloor)
      os << llvm::formatv("warning: {0} uses {1:P0} of the sectors it moves "
                          "({2})\n",
                          name, *efficiency,
                          megabytes(integer(*kernel, "footprint_bytes")));
  }
  for (const llvm::json::Value &entry : *report.getArray("gemms")) {
    const llvm::json::Object &gemm = *entry.getAsObject();
    if (integer(gemm, "m") == 1 || integer(gemm, "n") == 1)
      os << llvm::formatv("warning: GEMM of {0} is {1}x{2}x{3} (batch {4}): a "
                          "reduction, not a matrix product\n",
                          gemm.getString("node").value_or(""),
                          integer(gemm, "m"), integer(gemm, "n"),
                          integer(gemm, "k"), integer(gemm, "batch"));
  }
  return text;
}

namespace {

struct CudaKernelReportPass
    : public accrue::cuda::impl::CudaKernelReportBase<CudaKernelReportPass> {
  using Base::Base;

  void runOnOperation() override {
    markAllAnalysesPreserved();
    if (getOperation().isExternal())
      return;
    llvm::json::Value report =
        buildKernelReport(getOperation(), accumulationSteps).toJson();
    if (json)
      llvm::outs() << llvm::formatv("{0:2}", report) << "\n";
    else
      llvm::outs() << renderKernelReport(report);
  }
};

} // namespace
