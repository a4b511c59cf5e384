//===- Trainer.cpp - load and run a compiled step ---------------*- C++ -*-===//

#include "accrue-runtime/Runtime.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <malloc.h>

using namespace accrue::rt;

//===----------------------------------------------------------------------===//
// Artifact
//===----------------------------------------------------------------------===//

Artifact::Artifact(const std::string &directory) : dir(directory) {
  std::string manifestPath = path("step.json");
  nlohmann::json manifest =
      nlohmann::json::parse(readFile(manifestPath), nullptr, false);
  if (manifest.is_discarded() || !manifest.is_object() ||
      manifest.value("format", "") != "accrue-step")
    throw Error("'" + manifestPath + "' is not an Accrue step manifest");
  if (manifest.value("version", 0) != 1)
    throw Error("'" + manifestPath + "' has an unsupported version");
  try {
    for (const auto &arg : manifest.at("args")) {
      ArgSpec spec;
      spec.role = arg.at("role").get<std::string>();
      spec.name = arg.at("name").get<std::string>();
      spec.dtype = parseDType(arg.at("dtype").get<std::string>());
      spec.shape = arg.at("shape").get<std::vector<int64_t>>();
      args.push_back(std::move(spec));
    }
    for (const auto &param : manifest.at("params"))
      params.push_back({param.at("name").get<std::string>(),
                        param.at("shape").get<std::vector<int64_t>>(),
                        param.at("offset").get<int64_t>(),
                        param.at("numel").get<int64_t>()});
    arenaSize = manifest.at("arena_size").get<int64_t>();
    microBatch = manifest.at("micro_batch").get<int64_t>();
    accumulationSteps = manifest.at("accumulation_steps").get<int64_t>();
    optimizer = manifest.at("optimizer").at("name").get<std::string>();
    lr = manifest.at("optimizer").at("lr").get<double>();
    loss = manifest.value("loss", "");
    activationBytes = manifest.value("activation_bytes", int64_t(-1));
    partialWindows = manifest.value("partial_windows", false);
    collectives = manifest.value("collectives", std::string("none"));
    if (manifest.contains("loss_scale")) {
      const auto &ls = manifest.at("loss_scale");
      lossScaling.mode = ls.at("mode").get<std::string>();
      if (lossScaling.mode == "static")
        lossScaling.init = ls.at("scale").get<double>();
      if (lossScaling.mode == "dynamic") {
        lossScaling.init = ls.at("init").get<double>();
        lossScaling.growth = ls.at("growth").get<double>();
        lossScaling.backoff = ls.at("backoff").get<double>();
        lossScaling.interval = ls.at("interval").get<int64_t>();
      }
    }
    std::string library = path(manifest.at("library").get<std::string>());
    std::string entryName = manifest.at("entry").get<std::string>();
    this->library = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!this->library)
      throw Error("cannot load '" + library + "': " + dlerror());
    entry = reinterpret_cast<void (*)(void **)>(
        dlsym(this->library, entryName.c_str()));
    if (!entry)
      throw Error("'" + library + "' has no entry point '" + entryName + "'");
  } catch (const nlohmann::json::exception &e) {
    throw Error("'" + manifestPath + "' is malformed: " + e.what());
  }
}

Artifact::~Artifact() {
  if (library)
    dlclose(library);
}

void Artifact::call(void **packedArgs) const { entry(packedArgs); }

std::vector<const ArgSpec *> Artifact::batchInputs() const {
  std::vector<const ArgSpec *> inputs;
  for (const ArgSpec &arg : args)
    if (arg.role == "batch")
      inputs.push_back(&arg);
  return inputs;
}

std::vector<std::string> Artifact::stateNames() const {
  std::vector<std::string> names;
  for (const ArgSpec &arg : args)
    if (arg.role == "state")
      names.push_back(arg.name);
  return names;
}

//===----------------------------------------------------------------------===//
// PackedArgs
//===----------------------------------------------------------------------===//

void PackedArgs::addMemref(void *data, const std::vector<int64_t> &shape) {
  pointers.push_back(data);
  slots.push_back(&pointers.back()); // allocated
  slots.push_back(&pointers.back()); // aligned
  integers.push_back(0);
  slots.push_back(&integers.back()); // offset
  for (int64_t d : shape) {
    integers.push_back(d);
    slots.push_back(&integers.back());
  }
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  for (int64_t s : strides) {
    integers.push_back(s);
    slots.push_back(&integers.back());
  }
}

//===----------------------------------------------------------------------===//
// Arena
//===----------------------------------------------------------------------===//

Arena::Arena(int64_t size) : count(size) {
  size_t bytes = ((std::max<int64_t>(size, 1) * sizeof(float) + 63) / 64) * 64;
  values = static_cast<float *>(std::aligned_alloc(64, bytes));
  if (!values)
    throw Error("out of memory allocating an arena of " + std::to_string(size) +
                " floats");
  std::memset(values, 0, bytes);
}

Arena::~Arena() { std::free(values); }

void Arena::zero() { std::memset(values, 0, count * sizeof(float)); }

//===----------------------------------------------------------------------===//
// Trainer
//===----------------------------------------------------------------------===//

/// A step allocates and frees the same temporaries every micro-batch. With
/// glibc's defaults, large blocks are mapped and unmapped (and the heap top
/// trimmed) each time, and the page faults of touching them anew dominate
/// the step of a small model: 2.2x the step time of a 10M-parameter linear
/// model at micro-batch 1 (bench/fused_update.py). Keeping freed memory in
/// the heap lets the next micro-batch reuse it; peak memory is unchanged.
static void keepFreedMemoryForReuse() {
  static bool done = [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20); // glibc's largest allowed value
    // Blocks over that threshold would still be mapped and unmapped each
    // time (a 64 MB weight gradient of a 4096 x 4096 Linear, every
    // micro-batch): serve every block from the heap.
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    mallopt(M_TOP_PAD, 64 << 20);
    return true;
  }();
  (void)done;
}

Trainer::Trainer(const std::string &artifactDir)
    : art(std::make_unique<Artifact>(artifactDir)) {
  keepFreedMemoryForReuse();
  scale = art->lossScaling.mode == "none" ? 1.0 : art->lossScaling.init;
  paramArena = std::make_unique<Arena>(art->arenaSize);
  gradArena = std::make_unique<Arena>(art->arenaSize);
  for (const ArgSpec &arg : art->args)
    if (arg.role == "state")
      stateArenas.push_back(std::make_unique<Arena>(art->arenaSize));

  std::map<std::string, Array> init =
      readSafetensors(art->path("init.safetensors"));
  for (const ParamSpec &param : art->params) {
    auto it = init.find(param.name);
    if (it == init.end())
      throw Error("init.safetensors has no tensor '" + param.name + "'");
    const Array &a = it->second;
    if (a.dtype != DType::F32 || a.shape != param.shape)
      throw Error("init.safetensors: tensor '" + param.name +
                  "' does not match the manifest's shape");
    std::memcpy(paramArena->data() + param.offset, a.data.data(),
                param.numel * sizeof(float));
  }
  // Data-parallel ranks start from rank 0's parameters.
  if (art->dataParallel()) {
    if (!Collectives::get().agree(art->arenaSize))
      throw Error("the ranks loaded different artifacts (their arena sizes "
                  "differ); give every rank the same artifact");
    Collectives::get().broadcast(paramArena->data(), art->arenaSize);
  }
}

StepMetrics Trainer::step(const std::vector<const void *> &inputs,
                          int64_t samples, double lr, int64_t sampleBase,
                          int64_t valid) {
  std::vector<const ArgSpec *> batch = art->batchInputs();
  if (inputs.size() != batch.size())
    throw Error("step: expected " + std::to_string(batch.size()) +
                " batch inputs, got " + std::to_string(inputs.size()));
  // A data-parallel rank may get no sample of a partial window; it still
  // runs the step, whose all-reduce every rank must join (on padding only,
  // when the artifact reduces per micro-batch).
  bool idleRank = art->dataParallel() && valid == 0;
  if (!(idleRank && samples == 0) &&
      (samples <= 0 || samples % art->microBatch != 0))
    throw Error("step: " + std::to_string(samples) +
                " samples is not a positive multiple of the micro-batch (" +
                std::to_string(art->microBatch) + ")");
  if (valid < 0)
    valid = samples;
  if ((valid == 0 && !idleRank) || valid > samples)
    throw Error("step: " + std::to_string(valid) + " valid samples of " +
                std::to_string(samples));
  if (valid < samples && !art->partialWindows)
    throw Error("step: this artifact cannot mask padding (its loss form is "
                "not recognized), so every window must be full");
  int64_t validValue = valid;
  if (art->optimizer == "none")
    gradArena->zero();

  PackedArgs packed;
  float lrValue = static_cast<float>(lr);
  int64_t stepValue = completed + 1;
  float scaleValue = static_cast<float>(scale);
  float metrics[2] = {0, 0};
  size_t nextState = 0, nextInput = 0;
  for (const ArgSpec &arg : art->args) {
    if (arg.role == "params") {
      packed.addMemref(paramArena->data(), arg.shape);
    } else if (arg.role == "accumulator") {
      packed.addMemref(gradArena->data(), arg.shape);
    } else if (arg.role == "state") {
      packed.addMemref(stateArenas[nextState++]->data(), arg.shape);
    } else if (arg.role == "batch") {
      std::vector<int64_t> shape = arg.shape;
      shape[0] = samples;
      packed.addMemref(const_cast<void *>(inputs[nextInput++]), shape);
    } else if (arg.role == "lr") {
      packed.addScalar(&lrValue);
    } else if (arg.role == "step") {
      packed.addScalar(&stepValue);
    } else if (arg.role == "loss_scale") {
      packed.addScalar(&scaleValue);
    } else if (arg.role == "valid_samples") {
      packed.addScalar(&validValue);
    } else if (arg.role == "sample_base") {
      packed.addScalar(&sampleBase);
    } else if (arg.role == "metrics") {
      packed.addMemref(metrics, arg.shape);
    } else {
      throw Error("step.json: unknown argument role '" + arg.role + "'");
    }
  }
  art->call(packed.data());
  StepMetrics result{completed, metrics[0], metrics[1], lr, valid};
  if (art->lossScaling.mode == "none") {
    result.step = ++completed;
    return result;
  }
  // GradScaler's rule: an overflow skips the step (the compiled step left
  // parameters and state alone) and backs the scale off; `interval` finite
  // steps in a row grow it.
  result.lossScale = scale;
  result.skipped = !std::isfinite(metrics[1]);
  const LossScaling &ls = art->lossScaling;
  if (result.skipped) {
    streak = 0;
    if (ls.mode == "dynamic") {
      scale *= ls.backoff;
      if (scale < 1e-30)
        throw Error("step " + std::to_string(completed + 1) +
                    ": the gradient is not finite at any loss scale (NaN "
                    "data, or a diverged model)");
    }
  } else {
    ++completed;
    if (ls.mode == "dynamic" && ++streak == ls.interval) {
      scale *= ls.growth;
      streak = 0;
    }
  }
  result.step = completed;
  return result;
}

std::map<std::string, Array> Trainer::parameterArrays() const {
  std::map<std::string, Array> arrays;
  for (const ParamSpec &param : art->params) {
    Array a;
    a.dtype = DType::F32;
    a.shape = param.shape;
    const auto *begin =
        reinterpret_cast<const uint8_t *>(paramArena->data() + param.offset);
    a.data.assign(begin, begin + param.numel * sizeof(float));
    arrays[param.name] = std::move(a);
  }
  return arrays;
}

void Trainer::exportOnnx(const std::string &path) const {
  std::map<std::string, std::pair<const float *, int64_t>> values;
  for (const ParamSpec &param : art->params)
    values[param.name] = {paramArena->data() + param.offset, param.numel};
  std::string model = readFile(art->path("model.onnx"));
  writeFileAtomically(path, patchOnnxInitializers(model, values));
}
