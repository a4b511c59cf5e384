//===- accrue-train.cpp - run a compiled training step ----------*- C++ -*-===//
//
// Trains with an artifact from accrue-compile over a .npz dataset. Links only
// the runtime (no MLIR or LLVM).
//
//===----------------------------------------------------------------------===//

#include "accrue-runtime/Runtime.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <dirent.h>
#include <getopt.h>
#include <sys/stat.h>
#include <iostream>
#include <unistd.h>

using namespace accrue::rt;

namespace {

struct Options {
  std::string artifact;
  std::string data;
  int64_t steps = -1;
  int64_t accumulationSteps = -1;
  double lr = -1;
  std::string log;
  std::string exportPath;
  std::string saveGradients;
  std::string accumulationSchedule;
  bool dropLast = false;
  std::string checkpointDir;
  int64_t checkpointEvery = 0;
  int64_t keepCheckpoints = 2;
  bool resume = false;
  std::string lrSchedule = "constant";
  int64_t warmupSteps = 0;
  int64_t totalSteps = -1;
  int progress = -1; // -1: when stderr is a terminal
};

[[noreturn]] void usage(const char *message = nullptr) {
  if (message)
    std::cerr << "accrue-train: error: " << message << "\n";
  std::cerr
      << "usage: accrue-train ARTIFACT_DIR --data DATA.npz [--steps N]\n"
         "         [--accumulation-steps K | --accumulation-schedule S:K,...]\n"
         "         [--drop-last] [--lr X] [--lr-schedule constant|linear|cosine]\n"
         "         [--warmup-steps W] [--total-steps T] [--log METRICS.jsonl]\n"
         "         [--checkpoint-dir D [--checkpoint-every N]\n"
         "          [--keep-checkpoints K] [--resume]]\n"
         "         [--export TRAINED.onnx] [--save-gradients GRADS.npz]\n"
         "         [--progress | --no-progress]\n";
  std::exit(message ? 1 : 0);
}

int64_t parseInt(const char *flag, const char *text) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text, &end, 10);
  if (errno || !end || *end || end == text)
    throw Error(std::string(flag) + " expects an integer, got '" + text + "'");
  return v;
}

double parseDouble(const char *flag, const char *text) {
  char *end = nullptr;
  errno = 0;
  double v = std::strtod(text, &end);
  if (errno || !end || *end || end == text || !std::isfinite(v))
    throw Error(std::string(flag) + " expects a number, got '" + text + "'");
  return v;
}

Options parseOptions(int argc, char **argv) {
  enum {
    Steps = 1000,
    Accum,
    Lr,
    Log,
    Export,
    SaveGrads,
    Progress,
    NoProgress,
    Schedule,
    DropLast,
    LrSchedule,
    Warmup,
    Total,
    CheckpointDir,
    CheckpointEvery,
    KeepCheckpoints,
    Resume
  };
  static const option longOptions[] = {
      {"data", required_argument, nullptr, 'd'},
      {"steps", required_argument, nullptr, Steps},
      {"accumulation-steps", required_argument, nullptr, Accum},
      {"lr", required_argument, nullptr, Lr},
      {"log", required_argument, nullptr, Log},
      {"export", required_argument, nullptr, Export},
      {"save-gradients", required_argument, nullptr, SaveGrads},
      {"progress", no_argument, nullptr, Progress},
      {"no-progress", no_argument, nullptr, NoProgress},
      {"accumulation-schedule", required_argument, nullptr, Schedule},
      {"drop-last", no_argument, nullptr, DropLast},
      {"lr-schedule", required_argument, nullptr, LrSchedule},
      {"warmup-steps", required_argument, nullptr, Warmup},
      {"total-steps", required_argument, nullptr, Total},
      {"checkpoint-dir", required_argument, nullptr, CheckpointDir},
      {"checkpoint-every", required_argument, nullptr, CheckpointEvery},
      {"keep-checkpoints", required_argument, nullptr, KeepCheckpoints},
      {"resume", no_argument, nullptr, Resume},
      {"help", no_argument, nullptr, 'h'},
      {nullptr, 0, nullptr, 0}};
  Options o;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "hd:", longOptions, nullptr)) != -1) {
    switch (c) {
    case 'd':
      o.data = optarg;
      break;
    case Steps:
      o.steps = parseInt("--steps", optarg);
      if (o.steps < 1)
        throw Error("--steps must be >= 1");
      break;
    case Accum:
      o.accumulationSteps = parseInt("--accumulation-steps", optarg);
      if (o.accumulationSteps < 1)
        throw Error("--accumulation-steps must be >= 1, got " +
                    std::string(optarg));
      break;
    case Lr:
      o.lr = parseDouble("--lr", optarg);
      if (o.lr < 0)
        throw Error("--lr must be >= 0");
      break;
    case Log:
      o.log = optarg;
      break;
    case Export:
      o.exportPath = optarg;
      break;
    case SaveGrads:
      o.saveGradients = optarg;
      break;
    case Progress:
      o.progress = 1;
      break;
    case NoProgress:
      o.progress = 0;
      break;
    case Schedule:
      o.accumulationSchedule = optarg;
      break;
    case DropLast:
      o.dropLast = true;
      break;
    case LrSchedule:
      LRSchedule::parseKind(optarg);
      o.lrSchedule = optarg;
      break;
    case Warmup:
      o.warmupSteps = parseInt("--warmup-steps", optarg);
      if (o.warmupSteps < 0)
        throw Error("--warmup-steps must be >= 0");
      break;
    case Total:
      o.totalSteps = parseInt("--total-steps", optarg);
      if (o.totalSteps < 1)
        throw Error("--total-steps must be >= 1");
      break;
    case CheckpointDir:
      o.checkpointDir = optarg;
      break;
    case CheckpointEvery:
      o.checkpointEvery = parseInt("--checkpoint-every", optarg);
      if (o.checkpointEvery < 1)
        throw Error("--checkpoint-every must be >= 1");
      break;
    case KeepCheckpoints:
      o.keepCheckpoints = parseInt("--keep-checkpoints", optarg);
      if (o.keepCheckpoints < 1)
        throw Error("--keep-checkpoints must be >= 1");
      break;
    case Resume:
      o.resume = true;
      break;
    case 'h':
      usage();
    default:
      throw Error(std::string("unknown or incomplete option '") +
                  argv[optind - 1] + "'");
    }
  }
  if (optind + 1 != argc)
    throw Error("expected exactly one artifact directory");
  o.artifact = argv[optind];
  if (o.data.empty())
    throw Error("--data is required");
  if (o.lrSchedule == "constant" && (o.warmupSteps > 0 || o.totalSteps > 0))
    throw Error("--warmup-steps and --total-steps need --lr-schedule linear "
                "or cosine");
  if (o.checkpointDir.empty() && (o.resume || o.checkpointEvery > 0))
    throw Error(std::string(o.resume ? "--resume" : "--checkpoint-every") +
                " needs --checkpoint-dir");
  if (o.accumulationSteps > 0 && !o.accumulationSchedule.empty())
    throw Error("--accumulation-steps and --accumulation-schedule exclude "
                "each other");
  return o;
}

/// The dataset, one array per batch input in the input's dtype.
struct Dataset {
  std::vector<Array> arrays;
  int64_t numSamples = 0;
};

Dataset loadDataset(const std::string &path, const Artifact &artifact) {
  std::map<std::string, Array> npz = readNpz(path);
  Dataset data;
  std::string names;
  for (const ArgSpec *input : artifact.batchInputs())
    names += (names.empty() ? "" : ", ") + input->name;
  for (const ArgSpec *input : artifact.batchInputs()) {
    auto it = npz.find(input->name);
    if (it == npz.end())
      throw Error("'" + path + "' has no array '" + input->name +
                  "' (the model's inputs: " + names + ")");
    std::string what = "'" + path + "' array '" + input->name + "'";
    const Array &raw = it->second;
    auto shapeText = [](const std::vector<int64_t> &shape, bool batch) {
      std::string s = "(";
      for (size_t i = 0; i < shape.size(); ++i)
        s += (i ? ", " : "") +
             (batch && i == 0 ? std::string("N") : std::to_string(shape[i]));
      return s + ")";
    };
    bool shapeOk = raw.shape.size() == input->shape.size();
    for (size_t d = 1; shapeOk && d < raw.shape.size(); ++d)
      shapeOk = raw.shape[d] == input->shape[d];
    if (!shapeOk)
      throw Error(what + " has shape " + shapeText(raw.shape, false) +
                  ", expected " + shapeText(input->shape, true));
    Array converted = raw.convertTo(input->dtype, what);
    if (input->dtype == DType::F32) {
      const float *v = converted.as<float>();
      int64_t rowSize =
          converted.numElements() / std::max<int64_t>(raw.shape[0], 1);
      for (int64_t i = 0; i < converted.numElements(); ++i)
        if (!std::isfinite(v[i]))
          throw Error(what + " contains " + (std::isnan(v[i]) ? "NaN" : "Inf") +
                      " at sample " +
                      std::to_string(i / std::max<int64_t>(rowSize, 1)));
    }
    if (!data.arrays.empty() && raw.shape[0] != data.numSamples)
      throw Error(what + " has " + std::to_string(raw.shape[0]) +
                  " samples but the other arrays have " +
                  std::to_string(data.numSamples));
    data.numSamples = raw.shape[0];
    data.arrays.push_back(std::move(converted));
  }
  return data;
}

std::string humanBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (bytes >= 1024 && u < 3) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", bytes, units[u]);
  return buf;
}

/// Redraws the progress line on stderr, at most every 50 ms (and always for
/// the last step), so fast steps do not flood a slow terminal.
void drawProgress(int64_t step, int64_t total, const StepMetrics &m) {
  static auto last = std::chrono::steady_clock::time_point();
  auto now = std::chrono::steady_clock::now();
  if (step != total && now - last < std::chrono::milliseconds(50))
    return;
  last = now;
  const int width = 30;
  int filled = static_cast<int>(width * step / std::max<int64_t>(total, 1));
  std::string bar(filled, '=');
  if (filled < width)
    bar += '>' + std::string(width - filled - 1, ' ');
  std::fprintf(stderr, "\r[%s] %lld/%lld  loss %.5f  grad_norm %.4f  lr %.2e",
               bar.c_str(), static_cast<long long>(step),
               static_cast<long long>(total), m.loss, m.gradNorm, m.lr);
  if (step == total)
    std::fputc('\n', stderr);
  std::fflush(stderr);
}

/// `v` with enough digits to read back the same double.
std::string exactNumber(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

/// Checkpoint files in `dir` by step, "step-00000012.safetensors".
std::map<int64_t, std::string> listCheckpoints(const std::string &dir) {
  std::map<int64_t, std::string> found;
  DIR *d = opendir(dir.c_str());
  if (!d)
    return found;
  while (dirent *entry = readdir(d)) {
    std::string name = entry->d_name;
    const std::string prefix = "step-", suffix = ".safetensors";
    if (name.size() <= prefix.size() + suffix.size() ||
        name.compare(0, prefix.size(), prefix) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    std::string digits = name.substr(
        prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos)
      continue;
    found[std::stoll(digits)] = dir + "/" + name;
  }
  closedir(d);
  return found;
}

std::string checkpointPath(const std::string &dir, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "step-%08lld.safetensors",
                static_cast<long long>(step));
  return dir + "/" + name;
}

/// The flag that sets each configuration entry a checkpoint records.
const std::map<std::string, std::string> &configFlags() {
  static const std::map<std::string, std::string> flags = {
      {"data_samples", "--data (its number of samples)"},
      {"micro_batch", "the artifact's micro-batch"},
      {"accumulation", "--accumulation-steps / --accumulation-schedule"},
      {"drop_last", "--drop-last"},
      {"lr", "--lr"},
      {"lr_schedule", "--lr-schedule"},
      {"warmup_steps", "--warmup-steps"},
      {"total_steps", "--total-steps (default: --steps)"},
      {"ranks", "the number of data-parallel ranks (mpirun -np)"}};
  return flags;
}

int run(int argc, char **argv) {
  Options opts = parseOptions(argc, argv);
  Trainer trainer(opts.artifact);
  const Artifact &art = trainer.artifact();
  Dataset data = loadDataset(opts.data, art);
  // Data parallelism: each of the G ranks takes its b x K slice of every
  // global window of b x K x G samples; rank 0 alone writes.
  int ranks = art.dataParallel() ? Collectives::get().size() : 1;
  int rank = art.dataParallel() ? Collectives::get().rank() : 0;
  bool writer = rank == 0;
  if (!art.dataParallel() && std::getenv("OMPI_COMM_WORLD_SIZE") &&
      std::atoi(std::getenv("OMPI_COMM_WORLD_SIZE")) > 1)
    throw Error("launched by mpirun with several ranks, but the artifact was "
                "compiled without --data-parallel: every rank would train "
                "alone");

  AccumulationSchedule schedule =
      !opts.accumulationSchedule.empty()
          ? AccumulationSchedule::parse(opts.accumulationSchedule)
          : AccumulationSchedule(opts.accumulationSteps > 0
                                     ? opts.accumulationSteps
                                     : art.accumulationSteps);
  int64_t k = schedule.at(0);
  int64_t effective = art.microBatch * k * ranks;
  // A pass that does not end on a whole effective batch ends with a partial
  // window, padded and masked, when the step can mask padding.
  bool dropLast = opts.dropLast || !art.partialWindows;
  if (!opts.dropLast && !art.partialWindows &&
      (data.numSamples % effective != 0 || schedule.max() != k))
    std::cerr << "accrue-train: warning: this model's loss cannot mask "
                 "padded samples, so samples that do not fill an effective "
                 "batch at the end of a pass are skipped\n";
  if (dropLast && data.numSamples < art.microBatch * schedule.max() * ranks)
    throw Error("'" + opts.data + "' has " + std::to_string(data.numSamples) +
                " samples, fewer than one effective batch of " +
                std::to_string(art.microBatch * schedule.max() * ranks) +
                " (micro-batch " + std::to_string(art.microBatch) + " x " +
                std::to_string(schedule.max()) + " accumulation steps" +
                (ranks > 1 ? " x " + std::to_string(ranks) + " ranks" : "") +
                ")" +
                (opts.dropLast ? "; --drop-last skips partial batches"
                               : "; this model's loss cannot mask padded "
                                 "samples, so batches must be full"));
  WindowCursor cursor(data.numSamples, art.microBatch, dropLast);
  int64_t steps = opts.steps;
  if (steps <= 0) {
    // One pass over the data.
    WindowCursor probe = cursor;
    for (steps = 0; probe.next(schedule.at(steps) * ranks).epoch == 0;)
      ++steps;
  }
  double lr = opts.lr >= 0 ? opts.lr : art.lr;
  LRSchedule lrSchedule(LRSchedule::parseKind(opts.lrSchedule), lr,
                        opts.warmupSteps,
                        opts.totalSteps > 0 ? opts.totalSteps : steps);

  if (!writer)
    std::cout.setstate(std::ios::failbit);
  std::cout << "accrue-train: " << art.params.size() << " parameter tensors, "
            << art.arenaSize << " floats; micro-batch " << art.microBatch
            << " x " << k << " accumulation steps"
            << (ranks > 1 ? " x " + std::to_string(ranks) + " ranks" : "")
            << " = effective batch " << effective
            << (opts.accumulationSchedule.empty()
                    ? std::string()
                    : " (schedule " + opts.accumulationSchedule + ")")
            << "\n";
  if (art.activationBytes >= 0)
    std::cout << "accrue-train: estimated activation memory of one "
                 "micro-batch: "
              << humanBytes(art.activationBytes) << "\n";
  std::cout.flush();

  // What a checkpoint must agree on to resume bit for bit.
  std::map<std::string, std::string> config = {
      {"data_samples", std::to_string(data.numSamples)},
      {"micro_batch", std::to_string(art.microBatch)},
      {"accumulation", !opts.accumulationSchedule.empty()
                           ? opts.accumulationSchedule
                           : "0:" + std::to_string(k)},
      {"drop_last", dropLast ? "1" : "0"},
      {"lr", exactNumber(lr)},
      {"lr_schedule", opts.lrSchedule}};
  config["ranks"] = std::to_string(ranks);
  if (opts.lrSchedule != "constant") {
    config["warmup_steps"] = std::to_string(opts.warmupSteps);
    config["total_steps"] =
        std::to_string(opts.totalSteps > 0 ? opts.totalSteps : steps);
  }
  if (!opts.checkpointDir.empty()) {
    if (::mkdir(opts.checkpointDir.c_str(), 0755) != 0 && errno != EEXIST)
      throw Error("cannot create --checkpoint-dir '" + opts.checkpointDir +
                  "': " + std::strerror(errno));
  }
  int64_t iterations = 0;
  if (opts.resume) {
    std::map<int64_t, std::string> found = listCheckpoints(opts.checkpointDir);
    if (found.empty())
      throw Error("--resume: no checkpoint in '" + opts.checkpointDir + "'");
    const std::string &path = found.rbegin()->second;
    std::map<std::string, std::string> saved = trainer.loadCheckpoint(path);
    // Checkpoints older than data parallelism were written by one process.
    saved.emplace("ranks", "1");
    for (const auto &[key, flag] : configFlags()) {
      auto want = config.find(key);
      auto got = saved.find(key);
      std::string mine = want == config.end() ? "(unset)" : want->second;
      std::string theirs = got == saved.end() ? "(unset)" : got->second;
      if (mine != theirs)
        throw Error("--resume: checkpoint '" + path + "' was written with " +
                    flag + " = " + theirs + ", this run has " + mine +
                    "; resume with the same settings");
    }
    try {
      cursor.epoch = std::stoll(saved.at("epoch"));
      cursor.offset = std::stoll(saved.at("offset"));
      iterations = std::stoll(saved.at("iterations"));
    } catch (const std::exception &) {
      throw Error("--resume: checkpoint '" + path +
                  "' has no valid data position");
    }
    if (cursor.offset < 0 || cursor.offset >= data.numSamples)
      throw Error("--resume: checkpoint '" + path +
                  "' has a data position outside the data");
    std::cout << "accrue-train: resumed from " << path << " at step "
              << iterations << "\n";
  }
  auto saveCheckpoint = [&]() {
    std::map<std::string, std::string> run = config;
    run["epoch"] = std::to_string(cursor.epoch);
    run["iterations"] = std::to_string(iterations);
    run["offset"] = std::to_string(cursor.offset);
    // Dropout masks are a function of (seed, step, sample): the step count
    // and the data position are the whole random state.
    run["rng"] = "counter-based (seed, step, sample)";
    trainer.saveCheckpoint(
        checkpointPath(opts.checkpointDir, trainer.completedSteps()), run);
    std::map<int64_t, std::string> found = listCheckpoints(opts.checkpointDir);
    while (static_cast<int64_t>(found.size()) > opts.keepCheckpoints) {
      ::unlink(found.begin()->second.c_str());
      found.erase(found.begin());
    }
  };

  std::ofstream log;
  if (!opts.log.empty() && writer) {
    // A resumed run continues the log of the run it resumes.
    log.open(opts.log, opts.resume ? std::ios::app : std::ios::trunc);
    if (!log)
      throw Error("cannot write '" + opts.log + "'");
  }
  bool progress = opts.progress < 0 ? isatty(STDERR_FILENO) : opts.progress;

  auto start = std::chrono::steady_clock::now();
  std::vector<const void *> inputs(data.arrays.size());
  std::vector<std::vector<uint8_t>> staging(data.arrays.size());
  StepMetrics last{};
  // Steps are windows of data consumed: with loss scaling an overflowing
  // one is skipped and does not count as an optimizer step.
  int64_t firstStep = iterations;
  if (ranks > 1) {
    // Ranks that disagree on the data, the steps or the schedule would wait
    // forever in a collective that another rank never calls.
    std::string settings = std::to_string(steps) + "/" +
                           std::to_string(firstStep) + "/" +
                           std::to_string(cursor.epoch) + "/" +
                           std::to_string(cursor.offset);
    for (const auto &[key, value] : config)
      settings += "/" + key + "=" + value;
    if (!Collectives::get().agree(
            static_cast<int64_t>(std::hash<std::string>{}(settings))))
      throw Error("the ranks disagree on the run: every rank must get the "
                  "same --data, --steps, schedule flags and checkpoint");
  }
  if (firstStep >= steps)
    std::cout << "accrue-train: the checkpoint has " << firstStep
              << " steps; --steps " << steps << " asks for no more\n";
  bool scaling = art.lossScaling.mode != "none";
  for (int64_t s = firstStep; s < steps; ++s) {
    int64_t kNow = schedule.at(trainer.completedSteps());
    Window window = cursor.next(kNow * ranks);
    // This rank's share of the window.
    int64_t perRank = art.microBatch * kNow;
    int64_t first = window.first + rank * perRank;
    int64_t valid =
        std::min(std::max<int64_t>(window.valid - rank * perRank, 0), perRank);
    int64_t samples =
        (valid + art.microBatch - 1) / art.microBatch * art.microBatch;
    // An all-reduce per micro-batch needs the same number of micro-batches
    // on every rank: ranks short of samples run masked padding.
    if (art.collectives == "per-micro-batch")
      samples = perRank;
    for (size_t i = 0; i < data.arrays.size(); ++i) {
      const Array &a = data.arrays[i];
      size_t rowBytes = a.data.size() / std::max<int64_t>(a.shape[0], 1);
      const uint8_t *rows = a.data.data() + std::min(first, window.first) *
                                                rowBytes;
      if (valid == samples) {
        inputs[i] = valid ? a.data.data() + first * rowBytes : rows;
        continue;
      }
      // A partial window: its samples, then copies of its first sample up
      // to whole micro-batches (masked out of the loss by the step).
      rows = a.data.data() + (valid ? first : window.first) * rowBytes;
      staging[i].resize(samples * rowBytes);
      std::memcpy(staging[i].data(), rows, valid * rowBytes);
      for (int64_t r = valid; r < samples; ++r)
        std::memcpy(staging[i].data() + r * rowBytes, rows, rowBytes);
      inputs[i] = staging[i].data();
    }
    int64_t collectivesBefore =
        art.dataParallel() ? Collectives::get().calls() : 0;
    last = trainer.step(inputs, samples,
                        lrSchedule.at(trainer.completedSteps()), first, valid);
    last.samples = window.valid;
    iterations = s + 1;
    if (!std::isfinite(last.loss) && !last.skipped)
      throw Error("step " + std::to_string(s + 1) + ": the loss is " +
                  (std::isnan(last.loss) ? "NaN" : "infinite") +
                  "; stopping (check labels, data and learning rate)");
    if (log.is_open()) {
      nlohmann::json record = {{"step", s + 1},
                               {"loss", last.loss},
                               {"lr", last.lr},
                               {"grad_norm", last.gradNorm},
                               {"samples", last.samples}};
      if (art.dataParallel())
        record["all_reduces"] =
            Collectives::get().calls() - collectivesBefore;
      if (scaling) {
        record["loss_scale"] = last.lossScale;
        record["skipped"] = last.skipped;
        record["optimizer_steps"] = last.step;
      }
      log << record.dump() << "\n";
      log.flush();
    }
    if (progress && writer)
      drawProgress(s + 1, steps, last);
    if (writer && !opts.checkpointDir.empty() &&
        ((opts.checkpointEvery > 0 && (s + 1) % opts.checkpointEvery == 0) ||
         s + 1 == steps))
      saveCheckpoint();
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (steps > firstStep)
    std::cout << "accrue-train: " << steps - firstStep << " steps in "
              << seconds << " s; final loss " << last.loss << "\n";

  if (!opts.saveGradients.empty() && writer) {
    std::map<std::string, Array> grads;
    for (const ParamSpec &param : art.params) {
      Array a;
      a.shape = param.shape;
      const auto *begin = reinterpret_cast<const uint8_t *>(
          trainer.grads().data() + param.offset);
      a.data.assign(begin, begin + param.numel * sizeof(float));
      grads[param.name] = std::move(a);
    }
    writeNpz(opts.saveGradients, grads);
  }
  if (!opts.exportPath.empty() && writer) {
    trainer.exportOnnx(opts.exportPath);
    std::cout << "accrue-train: wrote " << opts.exportPath << "\n";
  }
  return 0;
}

/// Reports an error (naming the rank under mpirun) and ends every rank.
int fail(const char *what) {
  int rank = Collectives::rankIfParallel();
  // One write, so that the ranks' lines do not interleave.
  std::cerr << "accrue-train: error" +
                   (rank >= 0 ? " (rank " + std::to_string(rank) + ")"
                              : std::string()) +
                   ": " + what + "\n"
            << std::flush;
  Collectives::abortIfParallel(1);
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception &e) {
    return fail(e.what());
  }
}
