//===- Settings.cpp - options declared once, bound by every tool -*- C++ -*-===//

#include "accrue/Pipelines/Settings.h"

#include "accrue-runtime/Settings.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Regex.h"

#include <cmath>

using namespace llvm;
using namespace accrue;

std::string accrue::dashedSettingName(StringRef name) {
  std::string dashed = name.str();
  llvm::replace(dashed, '_', '-');
  return dashed;
}

const Setting *SettingTable::lookup(StringRef name) const {
  std::string underscored = name.str();
  llvm::replace(underscored, '-', '_');
  for (const Setting &setting : list)
    if (setting.name == underscored)
      return &setting;
  return nullptr;
}

std::optional<std::string> SettingTable::read(StringRef name,
                                              StringRef value) const {
  const Setting *setting = lookup(name);
  if (!setting)
    return "unknown setting '" + name.str() + "'";
  return setting->read(value);
}

std::optional<std::string> SettingTable::readAll(StringRef text) const {
  SmallVector<StringRef> items;
  text.split(items, ' ', -1, /*KeepEmpty=*/false);
  for (StringRef item : items) {
    auto [name, value] = item.split('=');
    const Setting *setting = lookup(name);
    if (!setting) {
      std::string known;
      for (const Setting &s : list)
        known += (known.empty() ? "" : ", ") + dashedSettingName(s.name);
      return "unknown option '" + name.str() + "' (options: " + known + ")";
    }
    // A flag given alone is set.
    if (!item.contains('=') && setting->kind == Setting::Kind::Flag)
      value = "true";
    if (std::optional<std::string> error = setting->read(value))
      return error;
  }
  return std::nullopt;
}

namespace {

std::string expects(StringRef name, StringRef what, StringRef value) {
  return settingRef(name.str()) + " expects " + what.str() + ", got '" +
         value.str() + "'";
}

} // namespace

void SettingTable::flag(std::string name, std::string help, bool &field) {
  Setting s{name, std::move(help), Setting::Kind::Flag, {}, field, {}};
  s.read = [name, &field](StringRef value) -> std::optional<std::string> {
    if (value.empty() || value == "true" || value == "1") {
      field = true;
    } else if (value == "false" || value == "0") {
      field = false;
    } else {
      return expects(name, "true or false", value);
    }
    return std::nullopt;
  };
  list.push_back(std::move(s));
}

void SettingTable::integer(std::string name, std::string help,
                           int64_t &field) {
  Setting s{name, std::move(help), Setting::Kind::Integer, {}, false, {}};
  s.read = [name, &field](StringRef value) -> std::optional<std::string> {
    if (value.trim().getAsInteger(10, field))
      return expects(name, "an integer", value);
    return std::nullopt;
  };
  list.push_back(std::move(s));
}

void SettingTable::integer(std::string name, std::string help,
                           std::optional<int64_t> &field) {
  Setting s{name, std::move(help), Setting::Kind::Integer, {}, false, {}};
  s.read = [name, &field](StringRef value) -> std::optional<std::string> {
    int64_t v;
    if (value.trim().getAsInteger(10, v))
      return expects(name, "an integer", value);
    field = v;
    return std::nullopt;
  };
  list.push_back(std::move(s));
}

/// A finite number.
static std::optional<double> parseNumber(StringRef value) {
  double v;
  if (value.trim().getAsDouble(v) || !std::isfinite(v))
    return std::nullopt;
  return v;
}

void SettingTable::number(std::string name, std::string help, double &field) {
  Setting s{name, std::move(help), Setting::Kind::Number, {}, false, {}};
  s.read = [name, &field](StringRef value) -> std::optional<std::string> {
    std::optional<double> v = parseNumber(value);
    if (!v)
      return expects(name, "a number", value);
    field = *v;
    return std::nullopt;
  };
  list.push_back(std::move(s));
}

void SettingTable::number(std::string name, std::string help,
                          std::optional<double> &field) {
  Setting s{name, std::move(help), Setting::Kind::Number, {}, false, {}};
  s.read = [name, &field](StringRef value) -> std::optional<std::string> {
    std::optional<double> v = parseNumber(value);
    if (!v)
      return expects(name, "a number", value);
    field = v;
    return std::nullopt;
  };
  list.push_back(std::move(s));
}

void SettingTable::text(std::string name, std::string help,
                        std::string &field) {
  Setting s{name, std::move(help), Setting::Kind::Text, {}, false, {}};
  s.read = [&field](StringRef value) -> std::optional<std::string> {
    field = value.str();
    return std::nullopt;
  };
  list.push_back(std::move(s));
}

void SettingTable::addChoice(std::string name, std::string help,
                             std::vector<std::string> spellings,
                             std::function<void(int)> store) {
  Setting s{name, std::move(help), Setting::Kind::Choice, spellings, false,
            {}};
  s.read = [name, spellings,
            store](StringRef value) -> std::optional<std::string> {
    for (auto [i, spelling] : llvm::enumerate(spellings))
      if (value == spelling) {
        store(static_cast<int>(i));
        return std::nullopt;
      }
    std::string list;
    for (auto [i, spelling] : llvm::enumerate(spellings))
      list += (i == 0 ? "" : i + 1 == spellings.size() ? " or " : ", ") +
              spelling;
    return settingRef(name) + " must be " + list + ", not '" + value.str() +
           "'";
  };
  list.push_back(std::move(s));
}

Setting &SettingTable::custom(
    std::string name, std::string help, Setting::Kind kind,
    std::function<std::optional<std::string>(StringRef)> read) {
  list.push_back(
      Setting{std::move(name), std::move(help), kind, {}, false, {}, read});
  return list.back();
}

void accrue::bindPipelineSettings(SettingTable &table,
                                  CompileOptions &options) {
  TrainPipelineOptions &train = options.train;
  CPULoweringOptions &cpu = options.cpu;
  table.choice("target",
               "Where the step runs: the CPU, an NVIDIA GPU (cuda), or the "
               "CUDA pipeline run serially on the CPU (cuda-emulated, for "
               "testing without a GPU)",
               options.target, accrueTargetName, accrueTargetCount());
  table.choice("loss_normalization",
               "How a mean-reduced loss is normalized over micro-batches: "
               "exact (sum and count, divided once) or per-micro-batch "
               "(mean of means, for comparison)",
               train.lossNormalization, accrueLossNormalizationName,
               accrueLossNormalizationCount());
  table.flag("fuse_optimizer",
             "Fuse normalization, clipping, the optimizer and the "
             "accumulator reset into one pass",
             train.fuseOptimizer);
  table.choice("precision",
               "Compute precision (parameters, gradients and optimizer "
               "state stay fp32)",
               train.precision, accruePrecisionName, accruePrecisionCount());
  table.choice("collectives",
               "Data-parallel gradient sums: none, deferred (one all-reduce "
               "per optimizer step, after the micro-batch loop) or "
               "per-micro-batch (for comparison)",
               train.collectives, accrueCollectivesName,
               accrueCollectivesCount());
  table.custom("data_parallel",
               "Sum gradients over the ranks of `mpirun -np G accrue-train` "
               "(collectives=deferred unless given)",
               Setting::Kind::Flag,
               [&train](StringRef value) -> std::optional<std::string> {
                 if (value == "false" || value == "0") {
                   train.collectives = ACCRUE_COLLECTIVES_NONE;
                   return std::nullopt;
                 }
                 if (!value.empty() && value != "true" && value != "1")
                   return expects("data_parallel", "true or false", value);
                 if (train.collectives == ACCRUE_COLLECTIVES_NONE)
                   train.collectives = ACCRUE_COLLECTIVES_DEFERRED;
                 return std::nullopt;
               });
  table.custom(
      "recompute",
      "Activation recomputation in the backward: none, auto (keep the "
      "forward's cuts, recompute the segments between them; under "
      "--memory-budget only when it allows a larger micro-batch), or a "
      "regex of ONNX node names",
      Setting::Kind::Text,
      [&train](StringRef value) -> std::optional<std::string> {
        train.recomputeSegments = value == "auto";
        train.recomputeAuto = value == "auto";
        train.recomputeNodes.clear();
        if (value == "none" || value == "auto")
          return std::nullopt;
        std::string error;
        if (value.empty() || !llvm::Regex("^(" + value.str() + ")$").isValid(error))
          return settingRef("recompute") +
                 " must be none, auto or a regex of ONNX node names, not '" +
                 value.str() + "'" + (error.empty() ? "" : ": " + error);
        train.recomputeNodes = value.str();
        return std::nullopt;
      });
  table.flag("fuse_elementwise",
             "Fuse elementwise linalg ops before bufferization",
             cpu.fuseElementwise);
  table.flag("vectorize",
             "Register-tile and vectorize contractions (off: scalar loops, "
             "for comparison)",
             cpu.vectorize);
  table.flag("parallel",
             "Run large kernels on all cores (OpenMP; off: one thread, no "
             "libomp)",
             cpu.parallel);
  table.integer("vector_bits",
                "The target's vector register width for the contraction "
                "kernels (512, 256 or 128; default: the target CPU's in "
                "accrue-compile, 512 in pipelines)",
                cpu.vectorBits);
  table.text("cuda_arch",
             "GPU architectures to generate PTX for, comma-separated "
             "(sm_80,sm_90)",
             options.cuda.archs);
  table.text("cuda_toolkit",
             "The CUDA toolkit with libdevice and ptxas (default: "
             "CUDA_HOME, /usr/local/cuda, or the nvidia-cuda-nvcc Python "
             "package)",
             options.cuda.toolkit);
}

std::optional<std::string>
accrue::validatePipelineOptions(const CompileOptions &options) {
  SmallVector<StringRef> archs;
  StringRef(options.cuda.archs).split(archs, ',', -1, /*KeepEmpty=*/false);
  if (archs.empty())
    return settingRef("cuda_arch") + " needs at least one architecture";
  for (StringRef arch : archs) {
    unsigned version;
    if (!arch.consume_front("sm_") || arch.getAsInteger(10, version) ||
        version < 60)
      return settingRef("cuda_arch") + " expects architectures like sm_80 "
             "or sm_90 (sm_60 or newer), not '" + options.cuda.archs + "'";
  }
  if (std::optional<int64_t> bits = options.cpu.vectorBits;
      bits && *bits != 128 && *bits != 256 && *bits != 512)
    return settingRef("vector_bits") + " must be 128, 256 or 512, not " +
           std::to_string(*bits);
  return std::nullopt;
}
