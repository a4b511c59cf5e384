//===- Trainer.cpp - load and run a compiled step ---------------*- C++ -*-===//

#include "accrue-runtime/Trainer.h"

#include "accrue-runtime/Collectives.h"
#include "accrue-runtime/Settings.h"

#include "Gemm.h"
#include "Run/AccessCounter.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <sched.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif
#include <malloc.h>

using namespace accrue::rt;

//===----------------------------------------------------------------------===//
// Artifact
//===----------------------------------------------------------------------===//

/// step.so calls this runtime's entries by name (accrue_gemm, the CUDA
/// launch glue mgpu*, the collective hook), so the shared object that
/// defines them must be in the process's global scope, also when a host
/// loaded it RTLD_LOCAL: Python imports extension modules so, and the
/// libraries they need with them. Promotes it, once. (An executable that
/// links the runtime statically exports the entries with -rdynamic, as
/// accrue-train does.)
static void exposeRuntimeEntries() {
  static const bool exposed = [] {
    Dl_info info;
    if (dladdr(reinterpret_cast<void *>(&accrue_gemm), &info) &&
        info.dli_fname && *info.dli_fname)
      return dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL) !=
             nullptr;
    return false;
  }();
  (void)exposed;
}

Artifact::Artifact(const std::string &directory) : dir(directory) {
  std::string manifestPath = path(ACCRUE_FILE_MANIFEST);
  static_cast<Manifest &>(*this) =
      Manifest::parse(readFile(manifestPath), manifestPath);
  std::string libraryPath = path(library);
  // dlopen maps the file: a truncated one faults (SIGBUS) instead of
  // failing, so it must be the file the compiler wrote.
  checkFile(dir, library);
  // Idle OpenMP threads spin for 1 ms before they sleep (libomp's default,
  // 200 ms, keeps cores busy between steps and starves other processes);
  // a user's KMP_BLOCKTIME wins.
  ::setenv("KMP_BLOCKTIME", "1", /*overwrite=*/0);
  exposeRuntimeEntries();
  // RTLD_LOCAL: two artifacts in one process keep their symbols apart.
  handle = dlopen(libraryPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    throw Error("cannot load '" + libraryPath + "': " + dlerror());
  // The code must be what the manifest describes: a library from another
  // compile would be called with the wrong buffers.
  auto *compiled = static_cast<const uint64_t *>(
      dlsym(handle, ACCRUE_STEP_FINGERPRINT_SYMBOL));
  if (!compiled)
    throw Error("'" + libraryPath + "' is not an Accrue step (it has no " +
                ACCRUE_STEP_FINGERPRINT_SYMBOL + "); recompile the model");
  if (*compiled != fingerprint())
    throw Error("'" + libraryPath +
                "' was compiled for another manifest "
                "than '" +
                manifestPath + "' (contract " + fingerprintText(*compiled) +
                " vs " + fingerprintText(fingerprint()) +
                "): the artifact's files are mixed up or edited; recompile "
                "the model");
  entryPoint =
      reinterpret_cast<void (*)(void **)>(dlsym(handle, entry.c_str()));
  if (!entryPoint)
    throw Error("'" + libraryPath + "' has no entry point '" + entry + "'");
  if (countedAccesses)
    counter = std::make_unique<AccessCounter>(kernelReport);
}

Artifact::~Artifact() {
  if (handle)
    dlclose(handle);
}

void Artifact::checkFiles() const {
  for (const std::string *file : {&library, &init, &model})
    checkFile(dir, *file, /*sizeOnly=*/true);
}

void Artifact::call(void **packedArgs) const {
  if (!counter) {
    entryPoint(packedArgs);
    return;
  }
  AccessCounter::current() = counter.get();
  entryPoint(packedArgs);
  AccessCounter::current() = nullptr;
  counter->countStep();
  if (std::optional<std::string> error = counter->takeError())
    throw Error("'" + path(library) + "': " + *error);
}

std::string Artifact::kernelProfile() const {
  if (!counter)
    throw Error("'" + dir + "' does not count its kernels' accesses: " +
                "compile it with " + settingRef("count_accesses") +
                " (target cuda-emulated) for a kernel profile");
  return counter->profileJson();
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

void accrue::rt::flushDenormalsToZero() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_setcsr(_mm_getcsr() | 0x8040); // FTZ (bit 15) | DAZ (bit 6)
#endif
}

int64_t Artifact::setThreads(int64_t threads) const {
  // libomp comes with the step (a step without parallel loops does not
  // link it); dlsym searches the library's dependencies too.
  auto *set =
      reinterpret_cast<void (*)(int)>(dlsym(handle, "omp_set_num_threads"));
  if (!set)
    return 1;
  if (threads <= 0 && std::getenv("OMP_NUM_THREADS")) {
    // The user's OpenMP setting stands.
    auto *get =
        reinterpret_cast<int (*)()>(dlsym(handle, "omp_get_max_threads"));
    return get ? get() : 1;
  }
  if (threads <= 0) {
    cpu_set_t cpus;
    int64_t cores =
        sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
    const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    int64_t ranks = local ? std::max(1, std::atoi(local)) : 1;
    threads = std::max<int64_t>(1, cores / ranks);
  }
  set(static_cast<int>(threads));
  return threads;
}

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

Trainer::Trainer(std::shared_ptr<const Artifact> artifact,
                 std::optional<Device> device)
    : art(std::move(artifact)), deviceKind(device.value_or(deviceFor(*art))) {
  if (deviceKind != deviceFor(*art))
    throw Error("'" + art->dir + "' was compiled for target " +
                accrueTargetName(art->target) + ", which runs on " +
                deviceName(deviceFor(*art)) + ", not on " +
                settingRef("device") + " " + deviceName(deviceKind));
  keepFreedMemoryForReuse();
  exec = Backend::create(deviceKind);
  scale = art->lossScaling.mode == ACCRUE_LOSS_SCALE_NONE
              ? 1.0
              : art->lossScaling.init;
  // The initial values are read a tensor at a time into their slots (no
  // copy of the file beside the arenas); every tensor is checked first.
  art->checkFile(art->dir, art->init);
  SafetensorsFile init(art->path(art->init));
  auto initial = [&](const ParamSpec &param) -> const SafetensorsEntry & {
    const SafetensorsEntry *entry = init.find(param.name);
    if (!entry)
      throw Error("'" + init.path + "' has no tensor '" + param.name + "'");
    if (entry->dtype != ACCRUE_DTYPE_FLOAT32 || entry->shape != param.shape)
      throw Error("'" + init.path + "': tensor '" + param.name +
                  "' does not match the manifest's shape");
    return *entry;
  };
  for (const ParamSpec &param : art->params)
    initial(param);
  for (const ParamSpec &param : art->buffers)
    initial(param);
  size_t arenaBytes = art->arenaSize * sizeof(float);
  paramArena = Buffer(*exec, arenaBytes);
  if (art->shardOptimizer && !Collectives::get().shards())
    throw Error("'" + art->dir +
                "' shards its optimizer state (compiled with " +
                settingRef("shard_optimizer") +
                "), and the host's collectives have no reduce-scatter and "
                "all-gather");
  if (art->shardOptimizer)
    art->stateShard(Collectives::get().rank(), Collectives::get().size(),
                    stateBegin, stateSize);
  else
    art->stateShard(0, 1, stateBegin, stateSize);
  // (A buffer is never empty: the last ranks' shards may be.)
  gradArena =
      Buffer(*exec, art->shardGradients ? std::max<int64_t>(stateSize, 1) *
                                              int64_t(sizeof(float))
                                        : int64_t(arenaBytes));
  for (size_t s = 0; s < art->stateNames().size(); ++s)
    stateArenas.emplace_back(*exec, std::max<int64_t>(stateSize, 1) *
                                        int64_t(sizeof(float)));
  for (const ArgSpec &arg : art->args) {
    if (arg.role == ACCRUE_ROLE_WORKSPACE)
      workspace = Buffer(*exec, std::max<int64_t>(arg.shape[0], 1));
    if (arg.role == ACCRUE_ROLE_LOSS_SCALE_STREAK)
      deviceLossScale = arg.kind == ACCRUE_ARG_BUFFER;
    if (arg.role == ACCRUE_ROLE_METRICS) {
      metricsBuffer = Buffer(*exec, arg.fields.size() * sizeof(float));
      metricsArg = &arg;
    }
  }
  scalars = Buffer(*exec, 16 * 8);

  // Each tensor goes to its slot of the (zeroed) arena: read straight into
  // host memory, or through a buffer of its size to a device. No
  // arena-sized copy on the host beside the arenas.
  auto uploadSlots = [&](const std::vector<ParamSpec> &slots, Buffer &arena) {
    std::vector<float> staging;
    for (const ParamSpec &param : slots) {
      float *slot = static_cast<float *>(arena.data()) + param.offset;
      if (exec->hostMemory()) {
        init.read(initial(param), slot);
        continue;
      }
      staging.resize(param.numel);
      init.read(initial(param), staging.data());
      exec->upload(slot, staging.data(), param.numel * sizeof(float));
      // (The staging buffer is reused for the next tensor.)
      exec->synchronize();
    }
  };
  if (!art->buffers.empty()) {
    bufferArena = Buffer(*exec, art->buffersSize() * sizeof(float));
    uploadSlots(art->buffers, bufferArena);
  }
  if (art->dataParallel()) {
    // Data-parallel ranks start from rank 0's parameters, broadcast from
    // the host.
    if (!Collectives::get().agree(static_cast<int64_t>(art->fingerprint())))
      throw Error("the ranks loaded different artifacts (their contract "
                  "fingerprints differ); give every rank the same artifact");
    std::vector<float> params(art->arenaSize, 0.0f);
    for (const ParamSpec &param : art->params)
      init.read(initial(param), params.data() + param.offset);
    Collectives::get().broadcast(params.data(), art->arenaSize);
    exec->joinCollectives();
    exec->upload(paramArena.data(), params.data(), arenaBytes);
    exec->synchronize();
  } else {
    uploadSlots(art->params, paramArena);
  }
}

Trainer::~Trainer() {
  // Buffers go back to the backend before it goes.
  pending.clear();
  for (std::vector<Buffer> &set : batchBuffers)
    set.clear();
  stateArenas.clear();
  paramArena = Buffer();
  gradArena = Buffer();
  bufferArena = Buffer();
  workspace = Buffer();
  metricsBuffer = Buffer();
  scalars = Buffer();
}

void Trainer::reserveBatch(int64_t samples) {
  if (samples <= batchCapacity)
    return;
  // New buffers: calls captured with the old ones are stale, and a step
  // in flight may still read them.
  if (batchCapacity)
    exec->synchronize();
  exec->forgetCalls();
  for (std::vector<Buffer> &set : batchBuffers) {
    set.clear();
    for (const ArgSpec *input : art->batchInputs())
      set.emplace_back(*exec,
                       std::max<int64_t>(samples * input->bytesPerSample(), 1));
  }
  batchCapacity = samples;
}

bool Trainer::canLaunchAhead() const {
  return !exec->hostMemory() &&
         (art->lossScaling.mode == ACCRUE_LOSS_SCALE_NONE || deviceLossScale);
}

StepMetrics Trainer::step(const std::vector<const void *> &inputs,
                          int64_t samples, double lr, int64_t sampleBase,
                          int64_t valid) {
  launch(inputs, samples, lr, sampleBase, valid);
  return finish();
}

void Trainer::launch(const std::vector<const void *> &inputs, int64_t samples,
                     double lr, int64_t sampleBase, int64_t valid) {
  if (!pending.empty() && !canLaunchAhead())
    throw Error("step: the previous step has not finished (with loss "
                "scaling, each step needs the previous one's outcome)");
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
  if (!art->hasOptimizer())
    exec->fillZero(gradArena.data(), gradArena.bytes());

  // Batch inputs: host memory is passed as it is; a device gets a copy in
  // the buffers of this call's slot, made while the previous step runs.
  int slot = static_cast<int>(launched % 2);
  std::vector<void *> batchData(inputs.size());
  if (exec->hostMemory()) {
    for (size_t i = 0; i < inputs.size(); ++i)
      batchData[i] = const_cast<void *>(inputs[i]);
  } else {
    reserveBatch(samples);
    for (size_t i = 0; i < inputs.size(); ++i) {
      size_t bytes = batch[i]->bytesPerSample() * samples;
      void *buffer = batchBuffers[slot][i].data();
      exec->uploadForCall(buffer, inputs[i], bytes, slot, /*ahead=*/true);
      batchData[i] = buffer;
    }
  }

  // The per-step scalars: by value, or (device targets) in a buffer, one
  // 16-byte slot each: first those the host sets before every call, then
  // those a step that keeps its loss-scaling state on the device updates
  // itself (set by the host only when its state was loaded).
  struct Scalars {
    float lr;
    int64_t valid, sampleBase, step;
    float scale;
    int64_t streak;
  } values{
      static_cast<float>(lr),    valid, sampleBase, stepsAfterInFlight() + 1,
      static_cast<float>(scale), streak};
  enum { kLr, kValid, kSampleBase, kStep, kScale, kStreak, kSlots };
  alignas(16) uint8_t staged[16 * kSlots] = {};
  auto scalarSlot = [&](int index) -> void * {
    return static_cast<uint8_t *>(scalars.data()) + 16 * index;
  };
  std::memcpy(staged + 16 * kLr, &values.lr, sizeof values.lr);
  std::memcpy(staged + 16 * kValid, &values.valid, sizeof values.valid);
  std::memcpy(staged + 16 * kSampleBase, &values.sampleBase,
              sizeof values.sampleBase);
  std::memcpy(staged + 16 * kStep, &values.step, sizeof values.step);
  std::memcpy(staged + 16 * kScale, &values.scale, sizeof values.scale);
  std::memcpy(staged + 16 * kStreak, &values.streak, sizeof values.streak);
  size_t hostSlots = deviceLossScale && !deviceStateStale ? kStep : kSlots;
  exec->uploadForCall(scalars.data(), staged, 16 * hostSlots, slot,
                      /*ahead=*/false);
  deviceStateStale = false;

  PackedArgs packed;
  auto addScalar = [&](const ArgSpec &arg, void *value, int index) {
    if (arg.kind == ACCRUE_ARG_BUFFER)
      packed.addMemref(scalarSlot(index), {});
    else
      packed.addScalar(value);
  };
  size_t nextState = 0, nextInput = 0;
  for (const ArgSpec &arg : art->args) {
    switch (arg.role) {
    case ACCRUE_ROLE_PARAMS:
      packed.addMemref(paramArena.data(), arg.shape);
      break;
    case ACCRUE_ROLE_ACCUMULATOR:
      packed.addMemref(gradArena.data(), art->shardGradients
                                             ? std::vector<int64_t>{stateSize}
                                             : arg.shape);
      break;
    case ACCRUE_ROLE_STATE:
      packed.addMemref(stateArenas[nextState++].data(), {stateSize});
      break;
    case ACCRUE_ROLE_BUFFERS:
      packed.addMemref(bufferArena.data(), arg.shape);
      break;
    case ACCRUE_ROLE_BATCH: {
      std::vector<int64_t> shape = arg.shape;
      shape[0] = samples;
      packed.addMemref(batchData[nextInput++], shape);
      break;
    }
    case ACCRUE_ROLE_LR:
      addScalar(arg, &values.lr, kLr);
      break;
    case ACCRUE_ROLE_STEP:
      addScalar(arg, &values.step, kStep);
      break;
    case ACCRUE_ROLE_VALID_SAMPLES:
      addScalar(arg, &values.valid, kValid);
      break;
    case ACCRUE_ROLE_SAMPLE_BASE:
      addScalar(arg, &values.sampleBase, kSampleBase);
      break;
    case ACCRUE_ROLE_LOSS_SCALE:
      addScalar(arg, &values.scale, kScale);
      break;
    case ACCRUE_ROLE_LOSS_SCALE_STREAK:
      addScalar(arg, &values.streak, kStreak);
      break;
    case ACCRUE_ROLE_METRICS:
      packed.addMemref(metricsBuffer.data(), arg.shape);
      break;
    case ACCRUE_ROLE_WORKSPACE:
      packed.addMemref(workspace.data(), arg.shape);
      break;
    case ACCRUE_ROLE_OUTPUT:
      throw Error("'" + art->dir + "' is not a training step (argument '" +
                  arg.name + "' is an output buffer)");
    }
  }
  exec->call(*art, packed, samples, slot);
  ++launched;
  pending.push_back(
      {exec->downloadLater(
           metricsBuffer.data(),
           metricsArg ? metricsArg->fields.size() * sizeof(float) : 0),
       lr, valid});
}

StepMetrics Trainer::finish() {
  if (pending.empty())
    throw Error("finish: no step was launched");
  Pending step = std::move(pending.front());
  pending.pop_front();
  const float *metrics = static_cast<const float *>(step.metrics->wait());
  double lr = step.lr;
  int64_t valid = step.valid;
  auto metric = [&](AccrueMetric which) -> double {
    if (metricsArg)
      for (size_t i = 0; i < metricsArg->fields.size(); ++i)
        if (metricsArg->fields[i] == accrueMetricName(which))
          return metrics[i];
    return NAN;
  };
  StepMetrics result;
  result.loss = metric(ACCRUE_METRIC_LOSS);
  result.gradNorm = metric(ACCRUE_METRIC_GRAD_NORM);
  result.lr = lr;
  result.samples = valid;
  if (art->lossScaling.mode == ACCRUE_LOSS_SCALE_NONE) {
    result.step = ++completed;
    return result;
  }
  // The step applied GradScaler's rule (its train.next_loss_scale): an
  // overflow skipped the update (parameters and state left alone) and
  // backed the scale off; `interval` finite steps in a row grew it. Its
  // metrics say the next scale and streak.
  result.lossScale = scale;
  result.skipped = !std::isfinite(result.gradNorm);
  double nextScale = metric(ACCRUE_METRIC_NEXT_LOSS_SCALE);
  double nextStreak = metric(ACCRUE_METRIC_LOSS_SCALE_STREAK);
  if (!std::isfinite(nextScale) || nextScale < 0 || !(nextStreak >= 0) ||
      nextStreak > double(int64_t(1) << 24))
    throw Error("step " + std::to_string(completed + 1) +
                ": the step reported an invalid next loss scale or streak (" +
                std::to_string(nextScale) + ", " + std::to_string(nextStreak) +
                ")");
  if (result.skipped && nextScale < 1e-30)
    throw Error("step " + std::to_string(completed + 1) +
                ": the gradient is not finite at any loss scale (NaN "
                "data, or a diverged model)");
  if (!result.skipped)
    ++completed;
  scale = nextScale;
  streak = static_cast<int64_t>(nextStreak);
  result.step = completed;
  return result;
}

std::vector<std::vector<float>>
Trainer::hostCopies(const std::vector<const Buffer *> &arenas) const {
  if (!pending.empty())
    throw Error("the state of a step in flight was read before it finished");
  std::vector<std::vector<float>> copies;
  for (const Buffer *arena : arenas) {
    copies.emplace_back(arena->bytes() / sizeof(float));
    if (arena->bytes()) // an empty arena (a model without buffers)
      exec->download(copies.back().data(), arena->data(), arena->bytes());
  }
  // One wait for all of them.
  exec->synchronize();
  return copies;
}

std::vector<float> Trainer::hostCopy(const Buffer &arena) const {
  return std::move(hostCopies({&arena}).front());
}

std::map<std::string, Array>
Trainer::arenaArrays(const Buffer &arena,
                     const std::vector<ParamSpec> &slots) const {
  if (slots.empty())
    return {};
  std::vector<float> values = hostCopy(arena);
  std::map<std::string, Array> arrays;
  for (const ParamSpec &param : slots) {
    Array a;
    a.dtype = ACCRUE_DTYPE_FLOAT32;
    a.shape = param.shape;
    const auto *begin =
        reinterpret_cast<const uint8_t *>(values.data() + param.offset);
    a.data.assign(begin, begin + param.numel * sizeof(float));
    arrays[param.name] = std::move(a);
  }
  return arrays;
}

std::map<std::string, Array> Trainer::parameterArrays() const {
  return arenaArrays(paramArena, art->params);
}

std::map<std::string, Array> Trainer::bufferArrays() const {
  return arenaArrays(bufferArena, art->buffers);
}

std::map<std::string, Array> Trainer::gradientArrays() const {
  if (art->shardGradients)
    throw Error("'" + art->dir +
                "' keeps only this rank's shard of the "
                "gradients (compiled with " +
                settingRef("shard_gradients") + ")");
  return arenaArrays(gradArena, art->params);
}

void Trainer::exportOnnx(const std::string &path) const {
  art->checkFile(art->dir, art->model);
  std::vector<std::vector<float>> arenas =
      hostCopies({&paramArena, &bufferArena});
  std::map<std::string, std::pair<const float *, int64_t>> values;
  for (const ParamSpec &param : art->params)
    values[param.name] = {arenas[0].data() + param.offset, param.numel};
  for (const ParamSpec &buffer : art->buffers)
    values[buffer.name] = {arenas[1].data() + buffer.offset, buffer.numel};
  std::string model = readFile(art->path(art->model));
  writeFileAtomically(path, patchOnnxInitializers(model, values));
}
