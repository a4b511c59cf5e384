//===- Session.cpp - a training run over a dataset --------------*- C++ -*-===//

#include "accrue-runtime/Session.h"

#include "accrue-runtime/Collectives.h"
#include "accrue-runtime/SettingTable.h"

#include "Formats/AtomicFile.h"
#include "Run/FolderLock.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

using namespace accrue::rt;

//===----------------------------------------------------------------------===//
// Options
//===----------------------------------------------------------------------===//

void SessionOptions::validate() const {
  auto atLeast = [](const char *name, std::optional<int64_t> value,
                    int64_t low) {
    if (value && *value < low)
      throw Error(settingRef(name) + " must be >= " + std::to_string(low) +
                  ", got " + std::to_string(*value));
  };
  atLeast("steps", steps, 1);
  atLeast("accumulation_steps", accumulationSteps, 1);
  atLeast("effective_batch", effectiveBatch, 1);
  atLeast("warmup_steps", warmupSteps, 0);
  atLeast("total_steps", totalSteps, 1);
  atLeast("checkpoint_every", checkpointEvery, 1);
  atLeast("keep_checkpoints", keepCheckpoints, 1);
  atLeast("threads", threads, 0);
  if (lr && !(std::isfinite(*lr) && *lr >= 0))
    throw Error(settingRef("lr") + " must be a finite number >= 0");
  if (accumulationSteps && !accumulationSchedule.empty())
    throw Error(settingRef("accumulation_steps") + " and " +
                settingRef("accumulation_schedule") + " exclude each other");
  if (effectiveBatch && (accumulationSteps || !accumulationSchedule.empty()))
    throw Error(settingRef("effective_batch") + " and " +
                settingRef(accumulationSteps ? "accumulation_steps"
                                             : "accumulation_schedule") +
                " exclude each other (K follows from the effective batch)");
  if (!accumulationSchedule.empty())
    AccumulationSchedule::parse(accumulationSchedule);
  if (lrSchedule == LRSchedule::Kind::Constant &&
      (warmupSteps > 0 || totalSteps))
    throw Error(settingRef("warmup_steps") + " and " +
                settingRef("total_steps") + " need " +
                settingRef("lr_schedule") + " linear or cosine");
  if (checkpointDir.empty() && (resume || checkpointEvery))
    throw Error(settingRef(resume ? "resume" : "checkpoint_every") + " needs " +
                settingRef("checkpoint_dir"));
  if (resumeNewBatch && !resume)
    throw Error(settingRef("resume_new_batch") + " needs " +
                settingRef("resume"));
}

accrue::SettingTable SessionOptions::settingTable() {
  accrue::SettingTable t;
  t.integer("steps", "optimizer steps in all (unset: one pass)", steps);
  t.integer("accumulation_steps", "micro-batches per optimizer step",
            accumulationSteps);
  t.text("accumulation_schedule", "K by step: S:K,S:K,... from step 0",
         accumulationSchedule);
  t.integer("effective_batch", "samples per optimizer step over all ranks",
            effectiveBatch);
  t.flag("drop_last", "skip a pass's last, partial window", dropLast);
  t.number("lr", "the learning rate (unset: the artifact's)", lr);
  t.choice("lr_schedule", "the learning-rate schedule", lrSchedule,
           &LRSchedule::kindName, 3);
  t.integer("warmup_steps", "linear warmup steps of the schedule", warmupSteps);
  t.integer("total_steps", "the schedule's length (unset: steps)", totalSteps);
  t.text("checkpoint_dir", "where checkpoints go", checkpointDir);
  t.integer("checkpoint_every", "optimizer steps between checkpoints",
            checkpointEvery);
  t.integer("keep_checkpoints", "checkpoints kept", keepCheckpoints);
  t.flag("resume", "continue from the newest checkpoint", resume);
  t.flag("resume_new_batch",
         "resume with another effective batch (the step count and the data "
         "position carry over)",
         resumeNewBatch);
  t.text("log", "metrics.jsonl to write (a resumed run appends)", log);
  t.choice("device", "where the step runs (unset: the artifact's target)",
           device, &deviceName, 2);
  t.integer("threads", "threads of the step's parallel loops", threads);
  t.flag("flush_denormals", "flush denormal floats to zero on the CPU",
         flushDenormals);
  return t;
}

const std::vector<std::string> &SessionOptions::settingNames() {
  static const std::vector<std::string> names = [] {
    SessionOptions defaults;
    accrue::SettingTable table = defaults.settingTable();
    std::vector<std::string> list;
    for (const accrue::Setting &setting : table.settings())
      list.push_back(setting.name);
    return list;
  }();
  return names;
}

void SessionOptions::set(const std::string &name, const std::string &value) {
  accrue::SettingTable table = settingTable();
  // The names as they are: the table would also take dashes.
  const accrue::Setting *setting = table.lookup(name);
  if (!setting || setting->name != name) {
    std::string known;
    for (const std::string &n : settingNames())
      known += (known.empty() ? "" : ", ") + n;
    throw Error("unknown setting '" + name + "' (known: " + known + ")");
  }
  if (std::optional<std::string> error = setting->read(value))
    throw Error(*error);
}

static SessionOptions validated(SessionOptions options) {
  options.validate();
  return options;
}

//===----------------------------------------------------------------------===//
// Checkpoint files
//===----------------------------------------------------------------------===//

namespace {

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
    std::string digits =
        name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.size() > 18 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      continue;
    found[std::stoll(digits)] = dir + "/" + name;
  }
  closedir(d);
  return found;
}

/// Removes what a killed process left of a checkpoint write,
/// "step-00000012.safetensors.tmp-Ab12Cd": the writes are atomic, so a
/// temporary file is never a checkpoint, only disk space.
void removeInterruptedWrites(const std::string &dir) {
  DIR *d = opendir(dir.c_str());
  if (!d)
    return;
  std::vector<std::string> stale;
  while (dirent *entry = readdir(d)) {
    std::string name = entry->d_name;
    if (name.compare(0, 5, "step-") == 0 &&
        name.find(".safetensors.tmp-") != std::string::npos)
      stale.push_back(dir + "/" + name);
  }
  closedir(d);
  for (const std::string &path : stale)
    ::unlink(path.c_str());
}

/// Removes the shard files of `checkpoint` ("<step>.shard-R-of-G").
void removeShards(const std::string &checkpoint) {
  size_t slash = checkpoint.rfind('/');
  std::string dir = checkpoint.substr(0, slash);
  std::string stem = checkpoint.substr(slash + 1);
  stem = stem.substr(0, stem.find('.')) + ".shard-";
  DIR *d = opendir(dir.c_str());
  if (!d)
    return;
  std::vector<std::string> shards;
  while (dirent *entry = readdir(d))
    if (std::string(entry->d_name).compare(0, stem.size(), stem) == 0)
      shards.push_back(dir + "/" + entry->d_name);
  closedir(d);
  for (const std::string &path : shards)
    ::unlink(path.c_str());
}

std::string checkpointPath(const std::string &dir, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "step-%08lld.safetensors",
                static_cast<long long>(step));
  return dir + "/" + name;
}

/// The setting behind each configuration entry a checkpoint records.
const std::map<std::string, std::string> &configSettings() {
  static const std::map<std::string, std::string> settings = {
      {"data_samples", settingRef("data") + " (its number of samples)"},
      {"micro_batch", "the artifact's micro-batch"},
      {"accumulation", settingRef("accumulation_steps") + " / " +
                           settingRef("accumulation_schedule")},
      {"effective_batch", settingRef("effective_batch")},
      {"drop_last", settingRef("drop_last")},
      {"lr", settingRef("lr")},
      {"lr_schedule", settingRef("lr_schedule")},
      {"warmup_steps", settingRef("warmup_steps")},
      {"total_steps",
       settingRef("total_steps") + " (default: " + settingRef("steps") + ")"},
      {"ranks", "the number of data-parallel ranks"}};
  return settings;
}

/// The settings that split a window among micro-batches and ranks.
constexpr const char *kSplitSettings[] = {"micro_batch", "accumulation",
                                          "ranks", "effective_batch"};

std::string lookupOr(const std::map<std::string, std::string> &settings,
                     const std::string &key) {
  auto it = settings.find(key);
  return it == settings.end() ? "(unset)" : it->second;
}

/// The samples per optimizer step a run's settings give, where they are
/// one number for every step: the fixed effective batch, or b x K x G
/// with one K ("0:K"; an accumulation schedule has none).
std::optional<int64_t>
windowOf(const std::map<std::string, std::string> &settings) {
  try {
    if (settings.count("effective_batch"))
      return std::stoll(settings.at("effective_batch"));
    const std::string &accumulation = settings.at("accumulation");
    if (accumulation.rfind("0:", 0) != 0 ||
        accumulation.find(',') != std::string::npos)
      return std::nullopt;
    return std::stoll(settings.at("micro_batch")) *
           std::stoll(accumulation.substr(2)) *
           std::stoll(settings.at("ranks"));
  } catch (const std::exception &) {
    return std::nullopt;
  }
}

/// Truncates `path` after its last newline, if anything follows it.
void dropTornRecord(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return;
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  if (text.empty() || text.back() == '\n')
    return;
  size_t end = text.rfind('\n');
  end = end == std::string::npos ? 0 : end + 1;
  if (::truncate(path.c_str(), static_cast<off_t>(end)) != 0)
    throw Error("cannot repair " + settingRef("log") + " '" + path +
                "': " + std::strerror(errno));
}

/// `v` with enough digits to read back the same double.
std::string exactNumber(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
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

} // namespace

//===----------------------------------------------------------------------===//
// Session
//===----------------------------------------------------------------------===//

Session::Session(std::shared_ptr<const Artifact> artifact, Dataset dataset,
                 SessionOptions options, NoticeSink sink)
    : opts(validated(std::move(options))), notices(std::move(sink)),
      trainer(std::move(artifact), opts.device), data(std::move(dataset)) {
  const Artifact &art = trainer.artifact();
  if (opts.flushDenormals)
    flushDenormalsToZero();
  threadCount = art.setThreads(opts.threads.value_or(0));
  // Data parallelism: each of the G ranks takes its b x K slice of every
  // global window of b x K x G samples; rank 0 alone writes.
  if (art.dataParallel()) {
    numRanks = Collectives::get().size();
    rank = Collectives::get().rank();
  }
  const char *worldSize = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (!art.dataParallel() && worldSize && std::atoi(worldSize) > 1)
    throw Error("launched by mpirun with several ranks, but the artifact was "
                "compiled without " +
                settingRef("data_parallel") + ": every rank would train alone");
  if (data.arrays.size() != art.batchInputs().size())
    throw Error(data.what + " does not hold the model's batch inputs");

  // A fixed effective batch (the option, or the artifact's unless K is
  // given): K micro-batches cover each rank's share of it.
  fixedBatch = opts.effectiveBatch;
  if (!fixedBatch && !opts.accumulationSteps &&
      opts.accumulationSchedule.empty())
    fixedBatch = art.effectiveBatch;
  if (fixedBatch)
    schedule = AccumulationSchedule(
        accumulationStepsFor(*fixedBatch, art.microBatch, numRanks));
  else
    schedule = !opts.accumulationSchedule.empty()
                   ? AccumulationSchedule::parse(opts.accumulationSchedule)
                   : AccumulationSchedule(opts.accumulationSteps.value_or(
                         art.accumulationSteps));
  int64_t k = schedule.at(0);
  startData();
  if (opts.steps) {
    steps = *opts.steps;
  } else {
    // One pass over the data.
    WindowCursor probe = *cursor;
    for (steps = 0; probe.next(windowSize(schedule.at(steps))).epoch == 0;)
      ++steps;
  }
  double lr = opts.lr.value_or(art.optimizer.lr);
  int64_t totalSteps = opts.totalSteps.value_or(steps);
  lrSchedule.emplace(opts.lrSchedule, lr, opts.warmupSteps, totalSteps);

  notify(Notice::Kind::Info,
         std::to_string(art.params.size()) + " parameter tensors, " +
             std::to_string(art.arenaSize) + " floats; micro-batch " +
             std::to_string(art.microBatch) + " x " + std::to_string(k) +
             " accumulation steps" +
             (numRanks > 1 ? " x " + std::to_string(numRanks) + " ranks" : "") +
             " = effective batch " + std::to_string(effectiveBatch()) +
             (fixedBatch && *fixedBatch != art.microBatch * k * numRanks
                  ? " (the last micro-batch of each rank's share is padded)"
                  : "") +
             (opts.accumulationSchedule.empty()
                  ? std::string()
                  : " (schedule " + opts.accumulationSchedule + ")") +
             (threadCount > 1 ? "; " + std::to_string(threadCount) + " threads"
                              : ""));
  if (art.activationBytes)
    notify(Notice::Kind::Info,
           "estimated activation memory of one micro-batch: " +
               humanBytes(static_cast<double>(*art.activationBytes)));

  config = {{"data_samples", std::to_string(data.numSamples)},
            {"micro_batch", std::to_string(art.microBatch)},
            {"accumulation", !opts.accumulationSchedule.empty()
                                 ? opts.accumulationSchedule
                                 : "0:" + std::to_string(k)},
            {"drop_last", opts.dropLast || !art.partialWindows ? "1" : "0"},
            {"lr", exactNumber(lr)},
            {"lr_schedule", LRSchedule::kindName(opts.lrSchedule)},
            {"ranks", std::to_string(numRanks)}};
  if (fixedBatch)
    config["effective_batch"] = std::to_string(*fixedBatch);
  if (opts.lrSchedule != LRSchedule::Kind::Constant) {
    config["warmup_steps"] = std::to_string(opts.warmupSteps);
    config["total_steps"] = std::to_string(totalSteps);
  }
  if (!opts.checkpointDir.empty() &&
      ::mkdir(opts.checkpointDir.c_str(), 0755) != 0 && errno != EEXIST)
    throw Error("cannot create " + settingRef("checkpoint_dir") + " '" +
                opts.checkpointDir + "': " + std::strerror(errno));
  if (!opts.checkpointDir.empty() && writes()) {
    // One run per folder: a second writer is refused before it touches
    // anything, including the first one's temporary files.
    folderLock = std::make_unique<FolderLock>(opts.checkpointDir,
                                              settingRef("checkpoint_dir"));
    if (folderLock->unsupported())
      notify(Notice::Kind::Warning, *folderLock->unsupported());
    removeInterruptedWrites(opts.checkpointDir);
  }
  if (opts.resume)
    resumeFromCheckpoint();
  if (!opts.log.empty() && writes()) {
    // A resumed run continues the log of the run it resumes, less a last
    // record a kill cut short (SIGKILL can end a write part way).
    if (opts.resume)
      dropTornRecord(opts.log);
    log.open(opts.log, opts.resume ? std::ios::app : std::ios::trunc);
    if (!log)
      throw Error("cannot write " + settingRef("log") + " '" + opts.log + "'");
  }
  if (numRanks > 1) {
    // Ranks that disagree on the data, the steps or the schedule would wait
    // forever in a collective that another rank never calls.
    std::string settings =
        std::to_string(steps) + "/" + std::to_string(iteration) + "/" +
        std::to_string(cursor->epoch) + "/" + std::to_string(cursor->offset);
    for (const auto &[key, value] : config)
      settings += "/" + key + "=" + value;
    if (!Collectives::get().agree(
            static_cast<int64_t>(std::hash<std::string>{}(settings))))
      throw Error("the ranks disagree on the run: every rank must get the "
                  "same data, steps, schedule settings and checkpoint");
  }
  if (iteration >= steps)
    notify(Notice::Kind::Info, "the checkpoint has " +
                                   std::to_string(iteration) + " steps; " +
                                   settingRef("steps") + " " +
                                   std::to_string(steps) + " asks for no more");
  syncsReported = trainer.backend().synchronizations();
  lastRecord = std::chrono::steady_clock::now();
}

Session::~Session() = default;

void Session::startData() {
  const Artifact &art = artifact();
  int64_t k = schedule.at(0);
  // A pass that does not end on a whole effective batch ends with a partial
  // window, padded and masked, when the step can mask padding.
  bool dropLast = opts.dropLast || !art.partialWindows;
  if (!opts.dropLast && !art.partialWindows &&
      (data.numSamples % effectiveBatch() != 0 || schedule.max() != k))
    notify(Notice::Kind::Warning,
           "this model's loss cannot mask padded samples, so samples that "
           "do not fill an effective batch at the end of a pass are skipped");
  if (fixedBatch)
    if (std::optional<std::string> problem =
            art.effectiveBatchProblem(*fixedBatch, k, numRanks))
      throw Error(*problem);
  int64_t largest = windowSize(schedule.max());
  if (dropLast && data.numSamples < largest)
    throw Error(
        data.what + " has " + std::to_string(data.numSamples) +
        " samples, fewer than one effective batch of " +
        std::to_string(largest) +
        (fixedBatch
             ? std::string()
             : " (micro-batch " + std::to_string(art.microBatch) + " x " +
                   std::to_string(schedule.max()) + " accumulation steps" +
                   (numRanks > 1 ? " x " + std::to_string(numRanks) + " ranks"
                                 : "") +
                   ")") +
        (opts.dropLast
             ? "; " + settingRef("drop_last") + " skips partial batches"
             : "; this model's loss cannot mask padded samples, so "
               "batches must be full"));
  cursor.emplace(data.numSamples, art.microBatch, dropLast);
}

void Session::setData(Dataset newData) {
  if (trainer.inFlight())
    throw Error("the data cannot change while a step runs");
  if (newData.arrays.size() != artifact().batchInputs().size())
    throw Error(newData.what + " does not hold the model's batch inputs");
  data = std::move(newData);
  startData();
  config["data_samples"] = std::to_string(data.numSamples);
}

int64_t Session::stepsLeftInPass() const {
  WindowCursor probe = *cursor;
  int64_t epoch = probe.epoch, done = trainer.completedSteps(), n = 0;
  while (probe.next(windowSize(schedule.at(done + n))).epoch == epoch)
    ++n;
  return n;
}

void Session::planSteps(int64_t total) {
  if (total < iteration)
    throw Error(settingRef("steps") + " " + std::to_string(total) +
                " is fewer than the " + std::to_string(iteration) +
                " steps already run");
  steps = total;
}

int64_t Session::effectiveBatch() const {
  return windowSize(schedule.at(trainer.completedSteps()));
}

int64_t Session::windowSize(int64_t k) const {
  return fixedBatch ? *fixedBatch : artifact().microBatch * k * numRanks;
}

int64_t Session::rankShare(int64_t k) const {
  return fixedBatch ? effectiveBatchShare(*fixedBatch, numRanks)
                    : artifact().microBatch * k;
}

void Session::notify(Notice::Kind kind, const std::string &text) const {
  if (notices && writes())
    notices({kind, text});
}

void Session::resumeFromCheckpoint() {
  std::map<int64_t, std::string> found = listCheckpoints(opts.checkpointDir);
  std::string resume = settingRef("resume");
  if (found.empty())
    throw Error(resume + ": no checkpoint in '" + opts.checkpointDir + "'");
  const std::string &path = found.rbegin()->second;
  std::map<std::string, std::string> saved = trainer.loadCheckpoint(path);
  // Checkpoints older than data parallelism were written by one process.
  saved.emplace("ranks", "1");
  // Another split of the same windows (micro-batch b, K, ranks G) resumes
  // too: the windows are global, Dropout's masks depend on the sample and
  // the step only, and the checkpoint's tensors go by name.
  std::optional<int64_t> savedWindow = windowOf(saved),
                         myWindow = windowOf(config);
  bool split = false;
  for (const char *key : kSplitSettings)
    split |= lookupOr(saved, key) != lookupOr(config, key);
  bool newBatch = split && savedWindow && myWindow && *savedWindow != *myWindow;
  if (newBatch && !opts.resumeNewBatch)
    throw Error(resume + ": checkpoint '" + path + "' was written with " +
                std::to_string(*savedWindow) +
                " samples per optimizer step, this run has " +
                std::to_string(*myWindow) + "; another micro-batch, " +
                settingRef("accumulation_steps") +
                " or rank count resumes only with the same effective batch "
                "(or with " +
                settingRef("resume_new_batch") + ")");
  bool resplit = split && savedWindow && myWindow;
  for (const auto &[key, setting] : configSettings()) {
    if (resplit &&
        std::find(std::begin(kSplitSettings), std::end(kSplitSettings), key) !=
            std::end(kSplitSettings))
      continue;
    std::string mine = lookupOr(config, key), theirs = lookupOr(saved, key);
    if (mine != theirs)
      throw Error(resume + ": checkpoint '" + path + "' was written with " +
                  setting + " = " + theirs + ", this run has " + mine +
                  "; resume with the same settings");
  }
  if (newBatch)
    notify(Notice::Kind::Warning,
           "resuming with " + std::to_string(*myWindow) +
               " samples per step where the checkpoint's run had " +
               std::to_string(*savedWindow) +
               " (the step count and the data position carry over)");
  else if (resplit)
    notify(Notice::Kind::Info,
           "resuming on another split of the same " +
               std::to_string(*myWindow) + " samples per step: micro-batch " +
               lookupOr(config, "micro_batch") + " x K " +
               lookupOr(config, "accumulation").substr(2) + " x " +
               lookupOr(config, "ranks") +
               " ranks (the checkpoint's: " + lookupOr(saved, "micro_batch") +
               " x " + lookupOr(saved, "accumulation").substr(2) + " x " +
               lookupOr(saved, "ranks") + ")");
  try {
    cursor->epoch = std::stoll(saved.at("epoch"));
    cursor->offset = std::stoll(saved.at("offset"));
    iteration = std::stoll(saved.at("iterations"));
  } catch (const std::exception &) {
    throw Error(resume + ": checkpoint '" + path +
                "' has no valid data position");
  }
  if (cursor->offset < 0 || cursor->offset >= data.numSamples ||
      cursor->epoch < 0 || iteration < 0)
    throw Error(resume + ": checkpoint '" + path +
                "' has a data position outside the data");
  notify(Notice::Kind::Info,
         "resumed from " + path + " at step " + std::to_string(iteration));
}

bool Session::checkpointsAfter(int64_t iter) const {
  return !opts.checkpointDir.empty() &&
         ((opts.checkpointEvery && iter % *opts.checkpointEvery == 0) ||
          iter == steps);
}

StepRecord Session::step() {
  if (trainer.inFlight() == 0)
    launchNext();
  // Run ahead: the device starts the next step while this one's metrics
  // come back, unless this one is the last or is checkpointed (the
  // checkpoint holds the state after it, and its data position).
  int64_t finishing = iteration + 1;
  // With loss scaling, a skipped step does not count: the learning rate
  // and K of the next one are known ahead only if they are constant.
  bool nextKnown = artifact().lossScaling.mode == ACCRUE_LOSS_SCALE_NONE ||
                   (opts.lrSchedule == LRSchedule::Kind::Constant &&
                    opts.accumulationSchedule.empty());
  if (trainer.canLaunchAhead() && nextKnown && trainer.inFlight() == 1 &&
      finishing < steps && !checkpointsAfter(finishing))
    launchNext();
  return finishOldest();
}

void Session::launchNext() {
  const Artifact &art = artifact();
  int64_t k = schedule.at(trainer.stepsAfterInFlight());
  Window window = cursor->next(windowSize(k));
  // This rank's share of the window.
  int64_t perRank = rankShare(k);
  int64_t first = window.first + rank * perRank;
  int64_t valid =
      std::min(std::max<int64_t>(window.valid - rank * perRank, 0), perRank);
  int64_t samples =
      (valid + art.microBatch - 1) / art.microBatch * art.microBatch;
  // Collectives per micro-batch need the same number of micro-batches on
  // every rank: ranks short of samples run masked padding.
  if (art.collectives == ACCRUE_COLLECTIVES_PER_MICRO_BATCH ||
      art.shardGradients)
    samples = art.microBatch * k;
  std::vector<const void *> inputs(data.arrays.size());
  staging.resize(data.arrays.size());
  for (size_t i = 0; i < data.arrays.size(); ++i) {
    const Array &a = data.arrays[i];
    size_t rowBytes = a.data.size() / std::max<int64_t>(a.shape[0], 1);
    if (valid == samples) {
      inputs[i] = a.data.data() + (valid ? first : window.first) * rowBytes;
      continue;
    }
    // A partial window: its samples, then copies of its first sample up
    // to whole micro-batches (masked out of the loss by the step).
    const uint8_t *rows =
        a.data.data() + (valid ? first : window.first) * rowBytes;
    staging[i].resize(samples * rowBytes);
    std::memcpy(staging[i].data(), rows, valid * rowBytes);
    for (int64_t r = valid; r < samples; ++r)
      std::memcpy(staging[i].data() + r * rowBytes, rows, rowBytes);
    inputs[i] = staging[i].data();
  }
  Launched launched;
  launched.samples = window.valid;
  int64_t collectivesBefore =
      art.dataParallel() ? Collectives::get().calls() : 0;
  int64_t scattersBefore = 0, gathersBefore = 0, floatsBefore = 0;
  if (art.dataParallel()) {
    Collectives &c = Collectives::get();
    scattersBefore = c.scatters();
    gathersBefore = c.gathers();
    floatsBefore = c.floats();
  }
  int64_t graphsBefore = trainer.backend().graphLaunches();
  // (The inputs are copied before launch() returns.)
  trainer.launch(inputs, samples, lrSchedule->at(trainer.stepsAfterInFlight()),
                 first, valid);
  launched.allReduces =
      art.dataParallel() ? Collectives::get().calls() - collectivesBefore : -1;
  if (art.dataParallel()) {
    Collectives &c = Collectives::get();
    launched.reduceScatters = c.scatters() - scattersBefore;
    launched.allGathers = c.gathers() - gathersBefore;
    launched.collectiveFloats = c.floats() - floatsBefore;
  }
  launched.graphLaunches = trainer.backend().graphLaunches() - graphsBefore;
  inFlight.push_back(launched);
}

StepRecord Session::finishOldest() {
  const Artifact &art = artifact();
  Launched launched = inFlight.front();
  inFlight.pop_front();
  StepRecord record;
  record.metrics = trainer.finish();
  record.metrics.samples = launched.samples;
  record.iteration = ++iteration;
  const StepMetrics &m = record.metrics;
  if (!std::isfinite(m.loss) && !m.skipped)
    throw Error("step " + std::to_string(iteration) + ": the loss is " +
                (std::isnan(m.loss) ? "NaN" : "infinite") +
                "; stopping (check labels, data and learning rate)");

  nlohmann::json line = {{"step", iteration},
                         {"loss", m.loss},
                         {"lr", m.lr},
                         {"grad_norm", m.gradNorm},
                         {"samples", m.samples}};
  if (art.dataParallel()) {
    record.allReduces = launched.allReduces;
    line["all_reduces"] = record.allReduces;
    line["collective_floats"] = launched.collectiveFloats;
    if (art.shardOptimizer) {
      line["reduce_scatters"] = launched.reduceScatters;
      line["all_gathers"] = launched.allGathers;
    }
  }
  if (art.lossScaling.mode != ACCRUE_LOSS_SCALE_NONE) {
    line["loss_scale"] = m.lossScale;
    line["skipped"] = m.skipped;
    line["optimizer_steps"] = m.step;
  }
  // Wall time since the previous step's record and checkpoint (a run
  // ahead by one step measures the device's throughput).
  auto now = std::chrono::steady_clock::now();
  record.milliseconds =
      std::chrono::duration<double, std::milli>(now - lastRecord).count();
  line["time_ms"] = std::round(record.milliseconds * 1000) / 1000;
  // Device synchronizations since the previous step's record (checkpoints
  // between steps wait for the device, and are not counted).
  if (trainer.device() == Device::CUDA) {
    line["device_bytes"] = trainer.backend().peakDeviceBytes();
    record.synchronizations =
        trainer.backend().synchronizations() - syncsReported;
    record.graphLaunches = launched.graphLaunches;
    line["device_syncs"] = record.synchronizations;
    line["graph_launches"] = record.graphLaunches;
  }
  record.json = line.dump();
  if (log.is_open()) {
    log << record.json << "\n";
    log.flush();
  }
  // The log line first: a run killed while writing the checkpoint resumes
  // from the previous one and logs this step again.
  // (Every rank writes its shard of a sharded optimizer state.)
  if ((writes() || trainer.shardsCheckpoints()) && checkpointsAfter(iteration))
    saveCheckpoint();
  syncsReported = trainer.backend().synchronizations();
  lastRecord = std::chrono::steady_clock::now();
  return record;
}

std::vector<StepRecord> Session::finishInFlight() {
  std::vector<StepRecord> records;
  while (trainer.inFlight())
    records.push_back(finishOldest());
  return records;
}

void Session::run(const std::function<void(const StepRecord &)> &onStep) {
  while (!done()) {
    StepRecord record = step();
    if (onStep)
      onStep(record);
  }
}

std::map<std::string, std::string> Session::runRecord() const {
  std::map<std::string, std::string> run = config;
  run["epoch"] = std::to_string(cursor->epoch);
  run["iterations"] = std::to_string(iteration);
  run["offset"] = std::to_string(cursor->offset);
  // Dropout masks are a function of (seed, step, sample): the step count
  // and the data position are the whole random state.
  run["rng"] = "counter-based (seed, step, sample)";
  return run;
}

void Session::saveCheckpointTo(const std::string &path) const {
  trainer.saveCheckpoint(path, runRecord());
}

std::string Session::saveCheckpoint() {
  if (opts.checkpointDir.empty())
    throw Error("no " + settingRef("checkpoint_dir") + " to write to");
  std::string path =
      checkpointPath(opts.checkpointDir, trainer.completedSteps());
  // Keep the newest keep_checkpoints. Rotating before the write too bounds
  // the folder at keep + 1 even when kills land between a write and its
  // rotation twice in a row (the extra one is never the newest).
  // A checkpoint goes before its shards: a set without it is none.
  auto rotate = [&] {
    if (!writes())
      return;
    std::map<int64_t, std::string> found = listCheckpoints(opts.checkpointDir);
    while (static_cast<int64_t>(found.size()) > opts.keepCheckpoints) {
      ::unlink(found.begin()->second.c_str());
      removeShards(found.begin()->second);
      found.erase(found.begin());
    }
  };
  rotate();
  trainer.saveCheckpoint(path, runRecord());
  rotate();
  return path;
}

void Session::exportOnnx(const std::string &path) const {
  trainer.exportOnnx(path);
}

void Session::saveGradients(const std::string &path) const {
  writeNpz(path, trainer.gradientArrays());
}

void Session::saveKernelProfile(const std::string &path) const {
  // Every launched step first: the profile counts what they ran.
  trainer.backend().synchronize();
  std::string profile = trainer.artifact().kernelProfile();
  AtomicFile file(path);
  file.write(profile.data(), profile.size());
  file.commit();
}
