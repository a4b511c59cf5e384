//===- Manifest.cpp - read and write step.json ------------------*- C++ -*-===//

#include "accrue-runtime/Manifest.h"
#include "accrue-runtime/Settings.h"

#include <nlohmann/json.hpp>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace accrue::rt;
using json = nlohmann::json;

std::vector<const ArgSpec *> Manifest::batchInputs() const {
  std::vector<const ArgSpec *> inputs;
  for (const ArgSpec &arg : args)
    if (arg.role == ACCRUE_ROLE_BATCH)
      inputs.push_back(&arg);
  return inputs;
}

std::vector<std::string> Manifest::stateNames() const {
  std::vector<std::string> names;
  for (const ArgSpec &arg : args)
    if (arg.role == ACCRUE_ROLE_STATE)
      names.push_back(arg.name);
  return names;
}

void Manifest::stateShard(int64_t rank, int64_t ranks, int64_t &begin,
                          int64_t &size) const {
  if (!shardOptimizer) {
    begin = 0;
    size = arenaSize;
    return;
  }
  accrueShard(arenaSize, rank, ranks, &begin, &size);
}

int64_t Manifest::buffersSize() const {
  for (const ArgSpec &arg : args)
    if (arg.role == ACCRUE_ROLE_BUFFERS)
      return arg.shape.empty() ? -1 : arg.shape[0];
  return 0;
}

std::optional<std::string>
Manifest::effectiveBatchProblem(int64_t e, int64_t k, int64_t ranks) const {
  if (partialWindows || e == microBatch * k * ranks)
    return std::nullopt;
  return settingRef("effective_batch") + " " + std::to_string(e) +
         " needs padded micro-batches (micro-batch " +
         std::to_string(microBatch) + " x " + std::to_string(k) +
         " accumulation steps x " + std::to_string(ranks) +
         " rank(s)), but this model's loss cannot mask padded samples; "
         "choose a multiple of the micro-batch times the ranks";
}

std::string accrue::rt::fingerprintText(uint64_t fingerprint) {
  char text[17];
  std::snprintf(text, sizeof text, "%016" PRIx64, fingerprint);
  return text;
}

//===----------------------------------------------------------------------===//
// File records
//===----------------------------------------------------------------------===//

namespace {

std::string crcText(uint32_t crc) {
  char text[9];
  std::snprintf(text, sizeof text, "%08" PRIx32, crc);
  return text;
}

} // namespace

bool accrue::rt::recordFile(const std::string &path, FileRecord &record,
                            std::string &error) noexcept {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = "cannot read '" + path + "': " + std::strerror(errno);
    return false;
  }
  std::vector<unsigned char> chunk(1 << 20);
  uLong crc = crc32(0L, Z_NULL, 0);
  int64_t bytes = 0;
  for (;;) {
    ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      error = "cannot read '" + path + "': " + std::strerror(errno);
      ::close(fd);
      return false;
    }
    if (n == 0)
      break;
    crc = crc32(crc, chunk.data(), static_cast<uInt>(n));
    bytes += n;
  }
  ::close(fd);
  record = {bytes, static_cast<uint32_t>(crc)};
  return true;
}

void Manifest::checkFile(const std::string &dir, const std::string &name,
                         bool sizeOnly) const {
  std::string path = dir + "/" + name;
  auto it = files.find(name);
  if (it == files.end())
    throw Error("'" + dir + "/" + ACCRUE_FILE_MANIFEST +
                "' has no record of '" + name + "'");
  const FileRecord &want = it->second;
  auto differs = [&](const std::string &how) {
    return Error("'" + path + "' is not the file accrue-compile wrote (" + how +
                 "): the artifact is truncated, mixed up or edited; "
                 "copy it again or recompile the model");
  };
  // The size first, from the inode: a truncated library faults inside
  // dlopen (SIGBUS) instead of failing.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    throw Error("cannot read '" + path + "': " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw Error("'" + path + "' is not a regular file");
  if (st.st_size != want.bytes)
    throw differs(std::to_string(st.st_size) + " bytes, " +
                  ACCRUE_FILE_MANIFEST + " records " +
                  std::to_string(want.bytes));
  if (sizeOnly)
    return;
  FileRecord got;
  std::string error;
  if (!recordFile(path, got, error))
    throw Error(error);
  if (got.bytes != want.bytes || got.crc32 != want.crc32)
    throw differs("CRC-32 " + crcText(got.crc32) + ", " + ACCRUE_FILE_MANIFEST +
                  " records " + crcText(want.crc32));
}

//===----------------------------------------------------------------------===//
// Fingerprint
//===----------------------------------------------------------------------===//

namespace {

/// FNV-1a, 64 bits, over a canonical text of the contract.
class Fingerprint {
public:
  Fingerprint &operator<<(const std::string &text) {
    for (unsigned char c : text) {
      hash ^= c;
      hash *= 0x100000001b3ull;
    }
    // A separator, so that fields cannot run into each other.
    hash ^= 0xff;
    hash *= 0x100000001b3ull;
    return *this;
  }
  Fingerprint &operator<<(int64_t v) { return *this << std::to_string(v); }
  Fingerprint &operator<<(double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", v);
    return *this << std::string(text);
  }
  Fingerprint &operator<<(const std::vector<int64_t> &shape) {
    *this << static_cast<int64_t>(shape.size());
    for (int64_t d : shape)
      *this << d;
    return *this;
  }
  uint64_t value() const { return hash; }

private:
  uint64_t hash = 0xcbf29ce484222325ull;
};

} // namespace

uint64_t Manifest::fingerprint() const noexcept {
  Fingerprint f;
  f << ACCRUE_MANIFEST_FORMAT << static_cast<int64_t>(ACCRUE_MANIFEST_VERSION)
    << accrueTargetName(target) << entry << microBatch << arenaSize
    << accruePrecisionName(precision)
    << accrueLossNormalizationName(lossNormalization)
    << accrueCollectivesName(collectives)
    << accrueLossScaleModeName(lossScaling.mode)
    << static_cast<int64_t>(partialWindows)
    << accrueOptimizerName(optimizer.kind);
  if (shardOptimizer)
    f << ACCRUE_KEY_SHARD_OPTIMIZER;
  if (shardGradients)
    f << ACCRUE_KEY_SHARD_GRADIENTS;
  for (const auto &[key, value] : optimizer.hyperparameters)
    f << key << value;
  f << (clipNorm ? *clipNorm : -1.0);
  f << static_cast<int64_t>(args.size());
  for (const ArgSpec &arg : args) {
    f << accrueArgRoleName(arg.role) << accrueArgKindName(arg.kind) << arg.name
      << dtypeName(arg.dtype) << arg.shape;
    for (const std::string &field : arg.fields)
      f << field;
  }
  for (const std::string &arch : cudaArchs)
    f << arch;
  f << static_cast<int64_t>(params.size());
  for (const ParamSpec &param : params)
    f << param.name << param.shape << param.offset << param.numel;
  if (!buffers.empty()) {
    f << static_cast<int64_t>(buffers.size());
    for (const ParamSpec &buffer : buffers)
      f << buffer.name << buffer.shape << buffer.offset << buffer.numel;
  }
  return f.value();
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

namespace {

json memoryPlanJson(const MemoryPlan &plan) {
  int64_t b = plan.microBatch, k = plan.accumulationSteps;
  return json{{"param_bytes", plan.params},
              {"gradient_bytes", plan.gradients},
              {"optimizer_state_bytes", plan.optimizerState},
              {"buffer_bytes", plan.buffers},
              {"static_bytes", plan.staticBytes()},
              {"activation_fixed_bytes", plan.activationFixed},
              {"activation_bytes_per_sample", plan.activationPerSample},
              {"input_bytes_per_sample", plan.inputPerSample},
              {"micro_batch", b},
              {"accumulation_steps", k},
              {"samples_per_rank", b * k},
              {"peak_bytes", plan.peakBytes(b, k)}};
}

} // namespace

std::string accrue::rt::memoryPlanJsonText(const MemoryPlan &plan) {
  return memoryPlanJson(plan).dump(2);
}

std::string Manifest::toJson() const noexcept {
  json argList = json::array();
  for (const ArgSpec &arg : args) {
    json entry = {{ACCRUE_KEY_ROLE, accrueArgRoleName(arg.role)},
                  {ACCRUE_KEY_KIND, accrueArgKindName(arg.kind)},
                  {ACCRUE_KEY_NAME, arg.name},
                  {ACCRUE_KEY_DTYPE, dtypeName(arg.dtype)},
                  {ACCRUE_KEY_SHAPE, arg.shape}};
    if (!arg.fields.empty())
      entry[ACCRUE_KEY_FIELDS] = arg.fields;
    if (!arg.indexChecks.empty()) {
      json checks = json::array();
      for (const IndexCheck &check : arg.indexChecks) {
        json c = {
            {"low", check.low}, {"high", check.high}, {"what", check.what}};
        if (check.ignore)
          c["ignore"] = *check.ignore;
        checks.push_back(std::move(c));
      }
      entry[ACCRUE_KEY_INDEX_CHECKS] = std::move(checks);
    }
    argList.push_back(std::move(entry));
  }
  auto slots = [](const std::vector<ParamSpec> &list) {
    json out = json::array();
    for (const ParamSpec &param : list)
      out.push_back({{ACCRUE_KEY_NAME, param.name},
                     {ACCRUE_KEY_SHAPE, param.shape},
                     {ACCRUE_KEY_OFFSET, param.offset},
                     {ACCRUE_KEY_NUMEL, param.numel}});
    return out;
  };
  json paramList = slots(params);
  json opt = {{ACCRUE_KEY_NAME, accrueOptimizerName(optimizer.kind)},
              {ACCRUE_KEY_LR, optimizer.lr}};
  for (const auto &[key, value] : optimizer.hyperparameters) {
    if (key == "nesterov")
      opt[key] = value != 0;
    else
      opt[key] = value;
  }
  json scaling = {{ACCRUE_KEY_MODE, accrueLossScaleModeName(lossScaling.mode)}};
  if (lossScaling.mode == ACCRUE_LOSS_SCALE_STATIC)
    scaling["scale"] = lossScaling.init;
  if (lossScaling.mode == ACCRUE_LOSS_SCALE_DYNAMIC) {
    scaling["init"] = lossScaling.init;
    scaling["growth"] = lossScaling.growth;
    scaling["backoff"] = lossScaling.backoff;
    scaling["interval"] = lossScaling.interval;
  }
  json manifest = {
      {ACCRUE_KEY_FORMAT, ACCRUE_MANIFEST_FORMAT},
      {ACCRUE_KEY_VERSION, ACCRUE_MANIFEST_VERSION},
      {ACCRUE_KEY_FINGERPRINT, fingerprintText(fingerprint())},
      {ACCRUE_KEY_TARGET, accrueTargetName(target)},
      {ACCRUE_KEY_LIBRARY, library},
      {ACCRUE_KEY_ENTRY, entry},
      {ACCRUE_KEY_INIT, init},
      {ACCRUE_KEY_MODEL, model},
      {ACCRUE_KEY_LOSS, loss},
      {ACCRUE_KEY_LOSS_NORMALIZATION,
       accrueLossNormalizationName(lossNormalization)},
      {ACCRUE_KEY_PRECISION, accruePrecisionName(precision)},
      {ACCRUE_KEY_COLLECTIVES, accrueCollectivesName(collectives)},
      {ACCRUE_KEY_MICRO_BATCH, microBatch},
      {ACCRUE_KEY_ACCUMULATION_STEPS, accumulationSteps},
      {ACCRUE_KEY_OPTIMIZER, std::move(opt)},
      {ACCRUE_KEY_CLIP_NORM, clipNorm ? json(*clipNorm) : json(nullptr)},
      {ACCRUE_KEY_ARENA_SIZE, arenaSize},
      {ACCRUE_KEY_PARAMS, std::move(paramList)},
      {ACCRUE_KEY_ARGS, std::move(argList)},
      {ACCRUE_KEY_PARTIAL_WINDOWS, partialWindows},
      {ACCRUE_KEY_LOSS_SCALE, std::move(scaling)},
  };
  if (effectiveBatch)
    manifest[ACCRUE_KEY_EFFECTIVE_BATCH] = *effectiveBatch;
  if (shardOptimizer)
    manifest[ACCRUE_KEY_SHARD_OPTIMIZER] = true;
  if (shardGradients)
    manifest[ACCRUE_KEY_SHARD_GRADIENTS] = true;
  if (!buffers.empty())
    manifest[ACCRUE_KEY_BUFFERS] = slots(buffers);
  if (activationBytes)
    manifest[ACCRUE_KEY_ACTIVATION_BYTES] = *activationBytes;
  if (memoryPlan)
    manifest[ACCRUE_KEY_MEMORY_PLAN] = memoryPlanJson(*memoryPlan);
  if (kernelReport) {
    json report =
        json::parse(*kernelReport, nullptr, /*allow_exceptions=*/false);
    if (!report.is_discarded())
      manifest[ACCRUE_KEY_KERNEL_REPORT] = std::move(report);
  }
  if (countedAccesses)
    manifest[ACCRUE_KEY_COUNTED_ACCESSES] = true;
  if (!cudaArchs.empty())
    manifest[ACCRUE_KEY_CUDA_ARCHS] = cudaArchs;
  json fileList = json::object();
  for (const auto &[name, record] : files)
    fileList[name] = {{"bytes", record.bytes},
                      {"crc32", crcText(record.crc32)}};
  manifest[ACCRUE_KEY_FILES] = std::move(fileList);
  // Names come from ONNX files: replace invalid UTF-8 rather than throw.
  return manifest.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

namespace {

/// Reads the enumeration spelled at `key` with `parse`.
template <typename Enum>
Enum readEnum(const json &object, const char *key,
              int (*parse)(const char *, Enum *), const std::string &path) {
  std::string text = object.at(key).get<std::string>();
  Enum value;
  if (parse(text.c_str(), &value) != 0)
    throw Error("'" + path + "' has an unknown " + key + " '" + text +
                "' (written by a newer compiler?)");
  return value;
}

} // namespace

Manifest Manifest::parse(const std::string &text, const std::string &path) {
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() ||
      doc.value(ACCRUE_KEY_FORMAT, "") != ACCRUE_MANIFEST_FORMAT)
    throw Error("'" + path + "' is not an Accrue step manifest");
  if (doc.value(ACCRUE_KEY_VERSION, 0) != ACCRUE_MANIFEST_VERSION)
    throw Error("'" + path + "' has manifest version " +
                doc.value(ACCRUE_KEY_VERSION, json(0)).dump() +
                "; this runtime reads version " +
                std::to_string(ACCRUE_MANIFEST_VERSION) +
                " (recompile the model with this accrue-compile)");
  Manifest m;
  try {
    m.target = readEnum(doc, ACCRUE_KEY_TARGET, accrueParseTarget, path);
    m.library = doc.at(ACCRUE_KEY_LIBRARY).get<std::string>();
    m.entry = doc.at(ACCRUE_KEY_ENTRY).get<std::string>();
    m.init = doc.at(ACCRUE_KEY_INIT).get<std::string>();
    m.model = doc.at(ACCRUE_KEY_MODEL).get<std::string>();
    for (const std::string *file : {&m.library, &m.init, &m.model})
      if (file->empty() || file->find('/') != std::string::npos)
        throw Error("'" + path + "' names a file outside its artifact: '" +
                    *file + "'");
    m.loss = doc.value(ACCRUE_KEY_LOSS, "");
    m.lossNormalization = readEnum(doc, ACCRUE_KEY_LOSS_NORMALIZATION,
                                   accrueParseLossNormalization, path);
    m.precision =
        readEnum(doc, ACCRUE_KEY_PRECISION, accrueParsePrecision, path);
    m.collectives =
        readEnum(doc, ACCRUE_KEY_COLLECTIVES, accrueParseCollectives, path);
    m.microBatch = doc.at(ACCRUE_KEY_MICRO_BATCH).get<int64_t>();
    m.accumulationSteps = doc.at(ACCRUE_KEY_ACCUMULATION_STEPS).get<int64_t>();
    if (doc.contains(ACCRUE_KEY_EFFECTIVE_BATCH))
      m.effectiveBatch = doc.at(ACCRUE_KEY_EFFECTIVE_BATCH).get<int64_t>();
    const json &opt = doc.at(ACCRUE_KEY_OPTIMIZER);
    m.optimizer.kind =
        readEnum(opt, ACCRUE_KEY_NAME, accrueParseOptimizer, path);
    m.optimizer.lr = opt.at(ACCRUE_KEY_LR).get<double>();
    for (const auto &[key, value] : opt.items())
      if (key != ACCRUE_KEY_NAME && key != ACCRUE_KEY_LR)
        m.optimizer.hyperparameters[key] = value.is_boolean()
                                               ? double(value.get<bool>())
                                               : value.get<double>();
    if (!doc.at(ACCRUE_KEY_CLIP_NORM).is_null())
      m.clipNorm = doc.at(ACCRUE_KEY_CLIP_NORM).get<double>();
    m.arenaSize = doc.at(ACCRUE_KEY_ARENA_SIZE).get<int64_t>();
    if (doc.contains(ACCRUE_KEY_SHARD_OPTIMIZER))
      m.shardOptimizer = doc.at(ACCRUE_KEY_SHARD_OPTIMIZER).get<bool>();
    if (doc.contains(ACCRUE_KEY_SHARD_GRADIENTS))
      m.shardGradients = doc.at(ACCRUE_KEY_SHARD_GRADIENTS).get<bool>();
    auto readSlots = [](const json &list, std::vector<ParamSpec> &out) {
      for (const json &param : list)
        out.push_back({param.at(ACCRUE_KEY_NAME).get<std::string>(),
                       param.at(ACCRUE_KEY_SHAPE).get<std::vector<int64_t>>(),
                       param.at(ACCRUE_KEY_OFFSET).get<int64_t>(),
                       param.at(ACCRUE_KEY_NUMEL).get<int64_t>()});
    };
    readSlots(doc.at(ACCRUE_KEY_PARAMS), m.params);
    if (doc.contains(ACCRUE_KEY_BUFFERS))
      readSlots(doc.at(ACCRUE_KEY_BUFFERS), m.buffers);
    for (const json &arg : doc.at(ACCRUE_KEY_ARGS)) {
      ArgSpec spec;
      spec.role = readEnum(arg, ACCRUE_KEY_ROLE, accrueParseArgRole, path);
      spec.kind = readEnum(arg, ACCRUE_KEY_KIND, accrueParseArgKind, path);
      spec.name = arg.at(ACCRUE_KEY_NAME).get<std::string>();
      spec.dtype = parseDType(arg.at(ACCRUE_KEY_DTYPE).get<std::string>());
      spec.shape = arg.at(ACCRUE_KEY_SHAPE).get<std::vector<int64_t>>();
      if (arg.contains(ACCRUE_KEY_FIELDS))
        spec.fields = arg.at(ACCRUE_KEY_FIELDS).get<std::vector<std::string>>();
      if (arg.contains(ACCRUE_KEY_INDEX_CHECKS))
        for (const json &c : arg.at(ACCRUE_KEY_INDEX_CHECKS)) {
          IndexCheck check;
          check.low = c.at("low").get<int64_t>();
          check.high = c.at("high").get<int64_t>();
          check.what = c.at("what").get<std::string>();
          if (c.contains("ignore"))
            check.ignore = c.at("ignore").get<int64_t>();
          spec.indexChecks.push_back(std::move(check));
        }
      m.args.push_back(std::move(spec));
    }
    if (doc.contains(ACCRUE_KEY_ACTIVATION_BYTES))
      m.activationBytes = doc.at(ACCRUE_KEY_ACTIVATION_BYTES).get<int64_t>();
    if (doc.contains(ACCRUE_KEY_MEMORY_PLAN)) {
      const json &p = doc.at(ACCRUE_KEY_MEMORY_PLAN);
      MemoryPlan plan;
      plan.params = p.at("param_bytes").get<int64_t>();
      plan.gradients = p.at("gradient_bytes").get<int64_t>();
      plan.optimizerState = p.at("optimizer_state_bytes").get<int64_t>();
      plan.buffers = p.at("buffer_bytes").get<int64_t>();
      plan.activationFixed = p.at("activation_fixed_bytes").get<int64_t>();
      plan.activationPerSample =
          p.at("activation_bytes_per_sample").get<int64_t>();
      plan.inputPerSample = p.at("input_bytes_per_sample").get<int64_t>();
      plan.microBatch = p.at("micro_batch").get<int64_t>();
      plan.accumulationSteps = p.at("accumulation_steps").get<int64_t>();
      m.memoryPlan = plan;
    }
    if (doc.contains(ACCRUE_KEY_KERNEL_REPORT)) {
      if (!doc.at(ACCRUE_KEY_KERNEL_REPORT).is_object())
        throw Error("'" + path + "': kernel_report is not an object");
      m.kernelReport = doc.at(ACCRUE_KEY_KERNEL_REPORT).dump();
    }
    if (doc.contains(ACCRUE_KEY_COUNTED_ACCESSES))
      m.countedAccesses = doc.at(ACCRUE_KEY_COUNTED_ACCESSES).get<bool>();
    m.partialWindows = doc.at(ACCRUE_KEY_PARTIAL_WINDOWS).get<bool>();
    if (doc.contains(ACCRUE_KEY_CUDA_ARCHS))
      m.cudaArchs =
          doc.at(ACCRUE_KEY_CUDA_ARCHS).get<std::vector<std::string>>();
    for (const auto &[name, record] : doc.at(ACCRUE_KEY_FILES).items()) {
      std::string crc = record.at("crc32").get<std::string>();
      char *end = nullptr;
      unsigned long value = std::strtoul(crc.c_str(), &end, 16);
      if (crc.empty() || crc.size() > 8 || *end ||
          name.find('/') != std::string::npos)
        throw Error("'" + path + "' has a malformed record of file '" + name +
                    "'");
      m.files[name] = {record.at("bytes").get<int64_t>(),
                       static_cast<uint32_t>(value)};
    }
    const json &scaling = doc.at(ACCRUE_KEY_LOSS_SCALE);
    m.lossScaling.mode =
        readEnum(scaling, ACCRUE_KEY_MODE, accrueParseLossScaleMode, path);
    if (m.lossScaling.mode == ACCRUE_LOSS_SCALE_STATIC)
      m.lossScaling.init = scaling.at("scale").get<double>();
    if (m.lossScaling.mode == ACCRUE_LOSS_SCALE_DYNAMIC) {
      m.lossScaling.init = scaling.at("init").get<double>();
      m.lossScaling.growth = scaling.at("growth").get<double>();
      m.lossScaling.backoff = scaling.at("backoff").get<double>();
      m.lossScaling.interval = scaling.at("interval").get<int64_t>();
    }
  } catch (const json::exception &e) {
    throw Error("'" + path + "' is malformed: " + e.what());
  }
  // What the runtime relies on before it calls anything.
  auto bad = [&](const std::string &why) {
    return Error("'" + path + "' is inconsistent: " + why);
  };
  if (m.microBatch < 1 || m.accumulationSteps < 1 ||
      (m.effectiveBatch && *m.effectiveBatch < 1))
    throw bad("the micro-batch, accumulation steps and effective batch must "
              "be positive");
  if (m.arenaSize < 1 || m.arenaSize > (int64_t(1) << 40))
    throw bad("the arena size is out of range");
  if (m.shardOptimizer && !m.dataParallel())
    throw bad("a sharded optimizer state needs a data-parallel step");
  if (m.shardGradients && (!m.shardOptimizer || m.target != ACCRUE_TARGET_CPU))
    throw bad("a sharded accumulator needs a sharded optimizer state and "
              "the CPU");
  auto checkSlots = [&](const std::vector<ParamSpec> &list, int64_t size,
                        const std::string &what) {
    for (const ParamSpec &param : list) {
      int64_t numel = 1;
      for (int64_t d : param.shape) {
        if (d < 0 || d > size)
          throw bad(what + " '" + param.name + "' has a bad shape");
        numel *= d;
      }
      if (numel != param.numel || param.offset < 0 ||
          param.offset > size - param.numel)
        throw bad(what + " '" + param.name + "' lies outside its arena");
    }
  };
  checkSlots(m.params, m.arenaSize, "parameter");
  int64_t buffersSize = m.buffersSize();
  if ((buffersSize > 0) != !m.buffers.empty() || buffersSize < 0 ||
      buffersSize > (int64_t(1) << 40))
    throw bad("the buffers do not match the buffer arena");
  checkSlots(m.buffers, buffersSize, "buffer");
  int64_t batchRows = 0;
  for (const ArgSpec &arg : m.args) {
    bool arena = arg.role == ACCRUE_ROLE_PARAMS ||
                 arg.role == ACCRUE_ROLE_ACCUMULATOR ||
                 arg.role == ACCRUE_ROLE_STATE;
    bool shard = (arg.role == ACCRUE_ROLE_STATE && m.shardOptimizer) ||
                 (arg.role == ACCRUE_ROLE_ACCUMULATOR && m.shardGradients);
    if (shard && arg.shape != std::vector<int64_t>{-1})
      throw bad("argument '" + arg.name +
                "' of a sharded step is not a shard of dynamic size");
    if (arena && !shard && arg.shape != std::vector<int64_t>{m.arenaSize})
      throw bad("argument '" + arg.name + "' is not an arena of " +
                std::to_string(m.arenaSize) + " floats");
    if (arg.role == ACCRUE_ROLE_BUFFERS &&
        (arg.shape.size() != 1 || arg.dtype != ACCRUE_DTYPE_FLOAT32))
      throw bad("the buffer arena must be f32[n]");
    if (arg.role == ACCRUE_ROLE_BATCH) {
      if (arg.shape.empty() || arg.shape[0] != -1)
        throw bad("batch input '" + arg.name +
                  "' has no effective-batch dimension");
      for (size_t d = 1; d < arg.shape.size(); ++d)
        if (arg.shape[d] < 0)
          throw bad("batch input '" + arg.name + "' has a bad shape");
      ++batchRows;
    }
    if (!arg.indexChecks.empty() &&
        (arg.role != ACCRUE_ROLE_BATCH ||
         (arg.dtype != ACCRUE_DTYPE_INT64 && arg.dtype != ACCRUE_DTYPE_INT32)))
      throw bad("argument '" + arg.name +
                "' has index checks but is no integer batch input");
    for (const IndexCheck &check : arg.indexChecks)
      if (check.low >= check.high)
        throw bad("argument '" + arg.name + "' has an empty index range");
    if (arg.kind == ACCRUE_ARG_SCALAR && !arg.shape.empty())
      throw bad("scalar argument '" + arg.name + "' has a shape");
    if (arg.role == ACCRUE_ROLE_WORKSPACE &&
        (arg.dtype != ACCRUE_DTYPE_UINT8 || arg.shape.size() != 1 ||
         arg.shape[0] < 0 || arg.shape[0] > (int64_t(1) << 40)))
      throw bad("the workspace must be u8[bytes]");
    if (arg.role == ACCRUE_ROLE_METRICS &&
        (arg.shape.size() != 1 ||
         arg.shape[0] != static_cast<int64_t>(arg.fields.size())))
      throw bad("the metrics buffer does not match its fields");
  }
  if (!batchRows)
    throw bad("the step has no batch inputs");
  // Loss scaling happens in the step, which takes the streak and reports
  // the next scale and streak.
  if (m.lossScaling.mode != ACCRUE_LOSS_SCALE_NONE) {
    auto has = [&](AccrueArgRole role) {
      return std::any_of(m.args.begin(), m.args.end(),
                         [&](const ArgSpec &a) { return a.role == role; });
    };
    auto reports = [&](AccrueMetric metric) {
      for (const ArgSpec &a : m.args)
        if (a.role == ACCRUE_ROLE_METRICS &&
            std::count(a.fields.begin(), a.fields.end(),
                       accrueMetricName(metric)))
          return true;
      return false;
    };
    if (!has(ACCRUE_ROLE_LOSS_SCALE) || !has(ACCRUE_ROLE_LOSS_SCALE_STREAK) ||
        !reports(ACCRUE_METRIC_GRAD_NORM) ||
        !reports(ACCRUE_METRIC_NEXT_LOSS_SCALE) ||
        !reports(ACCRUE_METRIC_LOSS_SCALE_STREAK))
      throw bad("it scales the loss, but its step does not take the loss "
                "scale and streak or report the next ones");
  }
  for (const std::string *file : {&m.library, &m.init, &m.model})
    if (!m.files.count(*file))
      throw bad("it has no record of '" + *file + "'");
  for (const auto &[name, record] : m.files)
    if (record.bytes < 0)
      throw bad("file '" + name + "' has a negative size");
  return m;
}
