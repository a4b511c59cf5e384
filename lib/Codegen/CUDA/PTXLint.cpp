//===- PTXLint.cpp - what the PTX of a CUDA step's kernels does -*- C++ -*-===//

#include "accrue/Codegen/CUDA/PTXLint.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <set>

using namespace llvm;
using namespace accrue::cuda;

namespace {

/// The registers an instruction's operand text names (%r12, %rd3, ...).
SmallVector<StringRef> registersIn(StringRef text) {
  SmallVector<StringRef> regs;
  for (size_t at = text.find('%'); at != StringRef::npos;
       at = text.find('%', at + 1)) {
    size_t end = at + 1;
    while (end < text.size() && (isAlnum(text[end]) || text[end] == '_'))
      ++end;
    regs.push_back(text.slice(at, end));
  }
  return regs;
}

/// Bytes of a PTX type suffix (f32, b64, u8, ...), 0 if not one.
int64_t typeBytes(StringRef suffix) {
  if (suffix.size() < 2 || !StringRef("fbusz").contains(suffix[0]))
    return 0;
  if (suffix == "bf16")
    return 2;
  unsigned bits;
  if (suffix.drop_front().getAsInteger(10, bits) || bits % 8 || bits > 64)
    return 0;
  return bits / 8;
}

/// Bytes a ld.global / st.global instruction moves per thread.
int64_t globalAccessBytes(StringRef opcode) {
  SmallVector<StringRef> parts;
  opcode.split(parts, '.');
  int64_t lanes = 1, bytes = 0;
  for (StringRef part : parts) {
    if (part.consume_front("v") && !part.empty() && isDigit(part[0]))
      part.getAsInteger(10, lanes);
    else if (int64_t b = typeBytes(part))
      bytes = b;
  }
  return lanes * bytes;
}

PTXKernelLint lintEntry(StringRef body) {
  PTXKernelLint lint;
  // Registers whose values come from the parameters alone (uniform over the
  // grid, known only at run time).
  DenseSet<StringRef> fromParameters;
  StringMap<size_t> labels;
  SmallVector<StringRef> lines;
  body.split(lines, '\n');
  for (auto [index, raw] : llvm::enumerate(lines)) {
    StringRef line = raw.trim();
    if (line.empty() || line.starts_with("//"))
      continue;
    if (line.ends_with(":")) {
      labels[line.drop_back()] = index;
      continue;
    }
    StringRef guard;
    if (line.starts_with("@")) {
      std::tie(guard, line) = line.split(' ');
      line = line.trim();
    }
    auto [opcode, operandText] = line.split(' ');
    operandText = operandText.trim().rtrim(';');
    if (opcode == "bra" || opcode.starts_with("bra.")) {
      auto it = labels.find(operandText.trim());
      if (it != labels.end() && it->second <= index)
        lint.loops = true;
      continue;
    }
    if (opcode.starts_with("ld.global") || opcode.starts_with("st.global")) {
      int64_t bytes = globalAccessBytes(opcode);
      lint.widestGlobalAccess = std::max(lint.widestGlobalAccess, bytes);
      lint.narrowestGlobalAccess =
          lint.narrowestGlobalAccess
              ? std::min(lint.narrowestGlobalAccess, bytes)
              : bytes;
    }
    SmallVector<StringRef> regs = registersIn(operandText);
    if (regs.empty())
      continue;
    StringRef dest = regs.front();
    ArrayRef<StringRef> sources = ArrayRef(regs).drop_front();
    if (opcode.starts_with("ld.param")) {
      fromParameters.insert(dest);
      continue;
    }
    if ((opcode.starts_with("div.") || opcode.starts_with("rem.")) &&
        !sources.empty() && fromParameters.contains(sources.back()))
      ++lint.parameterDivisions;
    // Arithmetic on parameter values only stays a parameter value; special
    // registers (%tid, %ctaid) and memory make it vary.
    bool uniform =
        !sources.empty() && !opcode.starts_with("ld.") &&
        !operandText.contains("%tid") && !operandText.contains("%ctaid") &&
        llvm::all_of(sources,
                     [&](StringRef r) { return fromParameters.contains(r); });
    if (uniform && !opcode.starts_with("st.") && !opcode.starts_with("setp"))
      fromParameters.insert(dest);
  }
  return lint;
}

} // namespace

std::map<std::string, PTXKernelLint> accrue::cuda::lintPTX(StringRef ptx) {
  std::map<std::string, PTXKernelLint> kernels;
  constexpr StringLiteral kEntry = ".entry ";
  for (size_t at = ptx.find(kEntry); at != StringRef::npos;) {
    size_t next = ptx.find(kEntry, at + kEntry.size());
    StringRef text = ptx.slice(at + kEntry.size(), next);
    StringRef name =
        text.take_until([](char c) { return c == '(' || isSpace(c); });
    kernels[name.str()] = lintEntry(text);
    at = next;
  }
  return kernels;
}

Expected<std::map<std::string, std::pair<int64_t, int64_t>>>
accrue::cuda::runPtxasVerbose(StringRef ptxas, StringRef arch, StringRef ptx) {
  SmallString<128> input, log;
  if (std::error_code ec =
          sys::fs::createTemporaryFile("accrue-lint", "ptx", input))
    return createStringError(ec, "cannot create a temporary PTX file");
  if (std::error_code ec =
          sys::fs::createTemporaryFile("accrue-lint", "log", log))
    return createStringError(ec, "cannot create a temporary file");
  auto cleanup = make_scope_exit([&] {
    sys::fs::remove(input);
    sys::fs::remove(log);
  });
  {
    std::error_code ec;
    raw_fd_ostream os(input, ec);
    if (ec)
      return createStringError(ec, "cannot write '%s'", input.c_str());
    os << ptx;
  }
  std::string archFlag = ("-arch=" + arch).str();
  SmallVector<StringRef> args = {ptxas, archFlag, "-v",
                                 input, "-o",     "/dev/null"};
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(log),
                                          StringRef(log)};
  std::string error;
  int rc =
      sys::ExecuteAndWait(ptxas, args, std::nullopt, redirects, 0, 0, &error);
  if (rc != 0)
    return createStringError(inconvertibleErrorCode(), "ptxas failed: %s",
                             error.c_str());
  ErrorOr<std::unique_ptr<MemoryBuffer>> text = MemoryBuffer::getFile(log);
  if (!text)
    return createStringError(text.getError(), "cannot read ptxas' output");
  // "Compiling entry function 'NAME' for ...", then "N bytes spill stores,
  // M bytes spill loads", then "Used R registers".
  std::map<std::string, std::pair<int64_t, int64_t>> kernels;
  std::string current;
  SmallVector<StringRef> lines;
  (*text)->getBuffer().split(lines, '\n');
  for (StringRef line : lines) {
    if (size_t at = line.find("Compiling entry function '");
        at != StringRef::npos) {
      current = line.drop_front(at + 26)
                    .take_until([](char c) { return c == '\''; })
                    .str();
      kernels[current] = {0, 0};
      continue;
    }
    if (current.empty())
      continue;
    if (size_t at = line.find("bytes spill stores"); at != StringRef::npos) {
      int64_t stores = 0, loads = 0;
      line.take_front(at).rtrim().rsplit(' ').second.getAsInteger(10, stores);
      StringRef rest = line.drop_front(at).split(',').second.trim();
      rest.take_until([](char c) { return c == ' '; }).getAsInteger(10, loads);
      kernels[current].second = stores + loads;
    } else if (size_t at = line.find("Used "); at != StringRef::npos) {
      line.drop_front(at + 5)
          .take_until([](char c) { return c == ' '; })
          .getAsInteger(10, kernels[current].first);
    }
  }
  return kernels;
}

double accrue::cuda::theoreticalOccupancy(StringRef arch, int64_t blockThreads,
                                          int64_t registers) {
  // Per SM (CUDA C Programming Guide, "Compute Capabilities", and the
  // occupancy calculator): 64K 32-bit registers allocated per warp in units
  // of 256; at most 64 resident warps (48 on sm_86 and sm_89) and 32 blocks.
  unsigned version = 90;
  arch.drop_front(3).getAsInteger(10, version);
  int64_t maxWarps = (version == 86 || version == 89) ? 48 : 64;
  int64_t maxBlocks = version == 86 ? 16 : version == 89 ? 24 : 32;
  constexpr int64_t kRegisters = 65536, kGranule = 256;
  int64_t warps = std::max<int64_t>((blockThreads + 31) / 32, 1);
  int64_t perWarp = (std::max<int64_t>(registers, 1) * 32 + kGranule - 1) /
                    kGranule * kGranule;
  int64_t byRegisters = kRegisters / (perWarp * warps);
  int64_t blocks = std::min({byRegisters, maxWarps / warps, maxBlocks});
  return double(blocks * warps) / double(maxWarps);
}

void accrue::cuda::addPTXLint(json::Object &report, StringRef arch,
                              StringRef ptx, StringRef ptxas) {
  std::map<std::string, PTXKernelLint> lint = lintPTX(ptx);
  std::string ptxasError;
  if (!ptxas.empty()) {
    Expected<std::map<std::string, std::pair<int64_t, int64_t>>> verbose =
        runPtxasVerbose(ptxas, arch, ptx);
    if (verbose) {
      for (const auto &[name, usage] : *verbose) {
        lint[name].registers = usage.first;
        lint[name].spillBytes = usage.second;
      }
    } else {
      ptxasError = toString(verbose.takeError());
    }
  }
  int64_t dividing = 0, serialLoops = 0, narrowStreaming = 0, spilling = 0,
          maxRegisters = 0;
  std::optional<double> lowestOccupancy;
  json::Array *kernels = report.getArray("kernels");
  for (json::Value &entry : *kernels) {
    json::Object &kernel = *entry.getAsObject();
    auto it = lint.find(kernel.getString("name").value_or("").str());
    if (it == lint.end())
      continue;
    const PTXKernelLint &k = it->second;
    json::Object ptxJson{{"parameter_divisions", k.parameterDivisions},
                         {"loops", k.loops},
                         {"widest_global_access", k.widestGlobalAccess},
                         {"narrowest_global_access", k.narrowestGlobalAccess}};
    dividing += k.parameterDivisions > 0;
    int64_t threads = kernel.getInteger("threads").value_or(0);
    serialLoops += threads == 1 && k.loops;
    narrowStreaming += kernel.getBoolean("grid_stride").value_or(false) &&
                       k.widestGlobalAccess < 16;
    if (k.registers) {
      const json::Array &block = *kernel.getArray("block");
      double occupancy = theoreticalOccupancy(arch,
                                              *block[0].getAsInteger() *
                                                  *block[1].getAsInteger() *
                                                  *block[2].getAsInteger(),
                                              *k.registers);
      ptxJson["registers"] = *k.registers;
      ptxJson["spill_bytes"] = *k.spillBytes;
      ptxJson["occupancy"] = std::round(occupancy * 1000) / 1000;
      spilling += *k.spillBytes > 0;
      maxRegisters = std::max(maxRegisters, *k.registers);
      lowestOccupancy =
          lowestOccupancy ? std::min(*lowestOccupancy, occupancy) : occupancy;
    }
    kernel["ptx"] = std::move(ptxJson);
  }
  json::Object totals{
      {"arch", arch},
      {"kernels_dividing_by_parameters", dividing},
      {"single_thread_kernels_with_loops", serialLoops},
      {"streaming_kernels_without_16_byte_accesses", narrowStreaming}};
  if (ptxasError.empty() && !ptxas.empty()) {
    totals["kernels_spilling"] = spilling;
    totals["max_registers"] = maxRegisters;
    totals["lowest_occupancy"] =
        lowestOccupancy
            ? json::Value(std::round(*lowestOccupancy * 1000) / 1000)
            : json::Value(nullptr);
  } else {
    totals["ptxas"] = ptxas.empty() ? "not found" : ptxasError;
  }
  report["ptx_totals"] = std::move(totals);
}
