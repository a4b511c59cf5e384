//===- accrue-train.cpp - run a compiled training step ----------*- C++ -*-===//
//
// Trains with an artifact from accrue-compile over a .npz dataset: binds
// flags to rt::SessionOptions, runs an rt::Session, draws the progress bar.
// Links only the runtime (no MLIR or LLVM).
//
//===----------------------------------------------------------------------===//

#include "accrue-runtime/Runtime.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <getopt.h>
#include <iostream>
#include <unistd.h>

using namespace accrue::rt;

namespace {

/// The signal that asked training to stop (0: none).
volatile std::sig_atomic_t stopSignal = 0;
void onStopSignal(int signal) { stopSignal = signal; }

/// Flags, beyond the session's own settings.
struct Options {
  std::string artifact;
  std::string data;
  std::string exportPath;
  std::string saveGradients;
  std::string kernelProfile;
  std::string launcher; // empty: ACCRUE_LAUNCHER, else detected
  int progress = -1;    // -1: when stderr is a terminal
  SessionOptions session;
};

[[noreturn]] void usage(const char *message = nullptr) {
  if (message)
    std::cerr << "accrue-train: error: " << message << "\n";
  std::cerr
      << "usage: accrue-train ARTIFACT_DIR --data DATA.npz [--steps N]\n"
         "         [--accumulation-steps K | --accumulation-schedule S:K,... "
         "|\n"
         "          --effective-batch E]\n"
         "         [--drop-last] [--lr X] [--lr-schedule "
         "constant|linear|cosine]\n"
         "         [--warmup-steps W] [--total-steps T] [--log METRICS.jsonl]\n"
         "         [--checkpoint-dir D [--checkpoint-every N]\n"
         "          [--keep-checkpoints K] [--resume [--resume-new-batch]]]\n"
         "         [--export TRAINED.onnx] [--save-gradients GRADS.npz]\n"
         "         [--kernel-profile PROFILE.json]\n"
         "         [--device cpu|cuda] [--threads N (0: the default)]\n"
         "         [--flush-denormals]\n"
         "         [--launcher auto|mpi|torchrun|slurm]\n"
         "         [--progress | --no-progress]\n";
  std::exit(message ? 1 : 0);
}

Options parseOptions(int argc, char **argv) {
  enum {
    Export = 1000,
    SaveGrads,
    KernelProfile,
    Launcher,
    Progress,
    NoProgress,
    Setting
  };
  // Every session setting is a flag of its name (with '-' for '_');
  // booleans take no argument.
  std::vector<std::string> flagNames;
  for (const std::string &name : SessionOptions::settingNames())
    flagNames.push_back(accrue::settingFlag(name).substr(2));
  std::vector<option> longOptions = {
      {"data", required_argument, nullptr, 'd'},
      {"export", required_argument, nullptr, Export},
      {"save-gradients", required_argument, nullptr, SaveGrads},
      {"kernel-profile", required_argument, nullptr, KernelProfile},
      {"launcher", required_argument, nullptr, Launcher},
      {"progress", no_argument, nullptr, Progress},
      {"no-progress", no_argument, nullptr, NoProgress},
      {"help", no_argument, nullptr, 'h'}};
  // Flags of the session's table take no argument.
  SessionOptions defaults;
  accrue::SettingTable table = defaults.settingTable();
  auto isBoolean = [&](const std::string &name) {
    const accrue::Setting *setting = table.lookup(name);
    return setting && setting->kind == accrue::Setting::Kind::Flag;
  };
  for (size_t i = 0; i < flagNames.size(); ++i)
    longOptions.push_back({flagNames[i].c_str(),
                           isBoolean(SessionOptions::settingNames()[i])
                               ? no_argument
                               : required_argument,
                           nullptr, Setting + static_cast<int>(i)});
  longOptions.push_back({nullptr, 0, nullptr, 0});
  Options o;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "hd:", longOptions.data(), nullptr)) !=
         -1) {
    switch (c) {
    case 'd':
      o.data = optarg;
      break;
    case Export:
      o.exportPath = optarg;
      break;
    case SaveGrads:
      o.saveGradients = optarg;
      break;
    case KernelProfile:
      o.kernelProfile = optarg;
      break;
    case Launcher:
      o.launcher = optarg;
      if (o.launcher != "auto" && o.launcher != "mpi" &&
          o.launcher != "torchrun" && o.launcher != "slurm")
        throw Error("--launcher must be auto, mpi, torchrun or slurm, not '" +
                    o.launcher + "'");
      break;
    case Progress:
      o.progress = 1;
      break;
    case NoProgress:
      o.progress = 0;
      break;
    case 'h':
      usage();
    default: {
      size_t index = static_cast<size_t>(c - Setting);
      if (c < Setting || index >= flagNames.size())
        throw Error(std::string("unknown or incomplete option '") +
                    argv[optind - 1] + "'");
      const std::string &name = SessionOptions::settingNames()[index];
      o.session.set(name, isBoolean(name) ? "true" : optarg);
    }
    }
  }
  if (optind + 1 != argc)
    throw Error("expected exactly one artifact directory");
  o.artifact = argv[optind];
  if (o.data.empty())
    throw Error("--data is required");
  o.session.validate();
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
  // The export reads the artifact's model after the run: a damaged one is
  // refused now, not after the training it would have exported.
  if (!opts.exportPath.empty())
    artifact->checkFile(artifact->dir, artifact->model);
  // So is a profile the artifact cannot count (kernelProfile() refuses
  // it, naming the compile flag).
  if (!opts.kernelProfile.empty() && !artifact->countedAccesses)
    artifact->kernelProfile();
  // Join the data-parallel ranks first, so that errors name the rank.
  if (!opts.launcher.empty())
    Collectives::setLauncher(opts.launcher);
  if (artifact->dataParallel())
    Collectives::get();
  Session session(artifact, Dataset::fromNpz(opts.data, *artifact),
                  opts.session, [](const Notice &notice) {
                    if (notice.kind == Notice::Kind::Warning)
                      std::cerr
                          << "accrue-train: warning: "
                          << renderSettings(notice.text, accrue::settingFlag)
                          << "\n";
                    else
                      std::cout
                          << "accrue-train: "
                          << renderSettings(notice.text, accrue::settingFlag)
                          << std::endl;
                  });
  bool writer = session.writes();
  bool progress = opts.progress < 0 ? isatty(STDERR_FILENO) : opts.progress;

  auto start = std::chrono::steady_clock::now();
  int64_t first = session.iterations();
  StepMetrics last;
  auto report = [&](const StepRecord &record) {
    last = record.metrics;
    if (progress && writer)
      drawProgress(record.iteration, session.plannedSteps(), last);
  };
  // SIGINT and SIGTERM stop after the current optimizer step (agreed by
  // every rank), with a checkpoint when there is a checkpoint directory.
  std::signal(SIGINT, onStopSignal);
  std::signal(SIGTERM, onStopSignal);
  bool stop = false;
  while (!session.done() && !stop) {
    report(session.step());
    stop = stopSignal != 0;
    if (artifact->dataParallel())
      stop = Collectives::get().anyRank(stop);
  }
  if (stop) {
    for (const StepRecord &record : session.finishInFlight())
      report(record);
    std::string where;
    if (!opts.session.checkpointDir.empty()) {
      std::string path = session.saveCheckpoint();
      where = "; checkpoint " + path + " (resume with --resume)";
    }
    if (progress && writer)
      std::fputc('\n', stderr);
    if (writer)
      std::cerr << "accrue-train: stopped by "
                << (stopSignal == SIGINT    ? "SIGINT"
                    : stopSignal == SIGTERM ? "SIGTERM"
                                            : "another rank")
                << " after step " << session.iterations() << where << "\n";
    return stopSignal ? 128 + stopSignal : 1;
  }
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
  if (!opts.kernelProfile.empty()) {
    session.saveKernelProfile(opts.kernelProfile);
    std::cout << "accrue-train: wrote " << opts.kernelProfile << "\n";
  }
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
  // A file-size limit fails the write (reported, temporary files removed)
  // instead of killing the process.
  std::signal(SIGXFSZ, SIG_IGN);
  try {
    return run(argc, argv);
  } catch (const Error &e) {
    return fail(e.render(accrue::settingFlag));
  } catch (const std::exception &e) {
    return fail(e.what());
  }
}
