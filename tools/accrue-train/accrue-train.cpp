//===- accrue-train.cpp - run a compiled training step ----------*- C++ -*-===//
//
// Trains with an artifact from accrue-compile over a .npz dataset: binds
// flags to rt::SessionOptions, runs an rt::Session, draws the progress bar.
// Links only the runtime (no MLIR or LLVM).
//
//===----------------------------------------------------------------------===//

#include "accrue-runtime/Runtime.h"

#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <getopt.h>
#include <iostream>
#include <unistd.h>

using namespace accrue::rt;

namespace {

/// Flags, beyond the session's own settings.
struct Options {
  std::string artifact;
  std::string data;
  std::string exportPath;
  std::string saveGradients;
  int progress = -1; // -1: when stderr is a terminal
  SessionOptions session;
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
         "         [--device cpu|cuda] [--progress | --no-progress]\n";
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
    Resume,
    DeviceFlag
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
      {"device", required_argument, nullptr, DeviceFlag},
      {"help", no_argument, nullptr, 'h'},
      {nullptr, 0, nullptr, 0}};
  Options o;
  SessionOptions &s = o.session;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "hd:", longOptions, nullptr)) != -1) {
    switch (c) {
    case 'd':
      o.data = optarg;
      break;
    case Steps:
      s.steps = parseInt("--steps", optarg);
      break;
    case Accum:
      s.accumulationSteps = parseInt("--accumulation-steps", optarg);
      break;
    case Lr:
      s.lr = parseDouble("--lr", optarg);
      break;
    case Log:
      s.log = optarg;
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
      s.accumulationSchedule = optarg;
      break;
    case DropLast:
      s.dropLast = true;
      break;
    case LrSchedule:
      s.lrSchedule = LRSchedule::parseKind(optarg);
      break;
    case Warmup:
      s.warmupSteps = parseInt("--warmup-steps", optarg);
      break;
    case Total:
      s.totalSteps = parseInt("--total-steps", optarg);
      break;
    case CheckpointDir:
      s.checkpointDir = optarg;
      break;
    case CheckpointEvery:
      s.checkpointEvery = parseInt("--checkpoint-every", optarg);
      break;
    case KeepCheckpoints:
      s.keepCheckpoints = parseInt("--keep-checkpoints", optarg);
      break;
    case Resume:
      s.resume = true;
      break;
    case DeviceFlag:
      s.device = parseDevice(optarg);
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
  s.validate();
  return o;
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

int run(int argc, char **argv) {
  Options opts = parseOptions(argc, argv);
  auto artifact = std::make_shared<const Artifact>(opts.artifact);
  // Join the data-parallel ranks first, so that errors name the rank.
  if (artifact->dataParallel())
    Collectives::get();
  Session session(artifact, Dataset::fromNpz(opts.data, *artifact),
                  opts.session, [](const Notice &notice) {
                    if (notice.kind == Notice::Kind::Warning)
                      std::cerr << "accrue-train: warning: "
                                << renderSettings(notice.text, accrue::settingFlag) << "\n";
                    else
                      std::cout << "accrue-train: "
                                << renderSettings(notice.text, accrue::settingFlag)
                                << std::endl;
                  });
  bool writer = session.writes();
  bool progress = opts.progress < 0 ? isatty(STDERR_FILENO) : opts.progress;

  auto start = std::chrono::steady_clock::now();
  int64_t first = session.iterations();
  StepMetrics last;
  session.run([&](const StepRecord &record) {
    last = record.metrics;
    if (progress && writer)
      drawProgress(record.iteration, session.plannedSteps(), last);
  });
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (!writer)
    return 0;
  if (session.plannedSteps() > first)
    std::cout << "accrue-train: " << session.plannedSteps() - first
              << " steps in " << seconds << " s; final loss " << last.loss
              << "\n";
  if (!opts.saveGradients.empty())
    session.saveGradients(opts.saveGradients);
  if (!opts.exportPath.empty()) {
    session.exportOnnx(opts.exportPath);
    std::cout << "accrue-train: wrote " << opts.exportPath << "\n";
  }
  return 0;
}

/// Reports an error (naming the rank under mpirun) and ends every rank.
int fail(const std::string &what) {
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
  } catch (const Error &e) {
    return fail(e.render(accrue::settingFlag));
  } catch (const std::exception &e) {
    return fail(e.what());
  }
}
