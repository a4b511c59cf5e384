//===- runtime-units.cpp - unit tests of the runtime's schedules ----------===//
//
// The window cursor, the accumulation schedule, the learning-rate
// schedules and the session's settings against values worked out by hand
// from their definitions (the
// LR schedules are transformers' get_{linear,cosine}_schedule_with_warmup;
// the cosine one's value at the middle of the decay is lr / 2). Run by
// test/Runtime/units.test; prints each failed check and exits 1.
//
//===----------------------------------------------------------------------===//

#include "accrue-runtime/Session.h"

#include <cmath>
#include <cstdio>
#include <string>

using namespace accrue::rt;

namespace {

int failures = 0;

void check(bool ok, const std::string &what) {
  if (!ok) {
    std::printf("FAILED: %s\n", what.c_str());
    ++failures;
  }
}

void checkWindow(const Window &w, int64_t first, int64_t valid, int64_t samples,
                 int64_t epoch, const std::string &what) {
  check(w.first == first && w.valid == valid && w.samples == samples &&
            w.epoch == epoch,
        what + ": got first " + std::to_string(w.first) + " valid " +
            std::to_string(w.valid) + " samples " + std::to_string(w.samples) +
            " epoch " + std::to_string(w.epoch));
}

/// Whether `run` throws an Error whose message contains `needle`.
template <typename F>
void checkThrows(F run, const std::string &needle, const std::string &what) {
  try {
    run();
  } catch (const Error &e) {
    check(std::string(e.what()).find(needle) != std::string::npos,
          what + ": message '" + e.what() + "' lacks '" + needle + "'");
    return;
  }
  check(false, what + ": did not throw");
}

void windows() {
  // 10 samples, micro-batch 3, windows of 6: the pass ends with 4 real
  // samples padded to 6 rows, then the next pass starts at sample 0.
  WindowCursor cursor(10, 3, /*dropLast=*/false);
  checkWindow(cursor.next(6), 0, 6, 6, 0, "first window");
  check(cursor.epoch == 0 && cursor.offset == 6, "position after 1 window");
  checkWindow(cursor.next(6), 6, 4, 6, 0, "partial window");
  check(cursor.epoch == 1 && cursor.offset == 0, "position after the pass");
  checkWindow(cursor.next(6), 0, 6, 6, 1, "second pass");

  // drop_last skips the remainder instead.
  WindowCursor dropping(10, 3, /*dropLast=*/true);
  checkWindow(dropping.next(6), 0, 6, 6, 0, "drop_last first window");
  checkWindow(dropping.next(6), 0, 6, 6, 1, "drop_last skips 4 samples");

  // A window the micro-batch does not divide: 3 real samples, 4 rows.
  WindowCursor odd(7, 2, /*dropLast=*/false);
  checkWindow(odd.next(4), 0, 4, 4, 0, "7 samples, first window");
  checkWindow(odd.next(4), 4, 3, 4, 0, "7 samples, padded window");

  // A resumed cursor continues where its checkpoint was.
  WindowCursor resumed(10, 3, /*dropLast=*/false);
  resumed.epoch = 2;
  resumed.offset = 6;
  checkWindow(resumed.next(6), 6, 4, 6, 2, "resumed cursor");

  checkThrows([] { WindowCursor(4, 2, true).next(6); }, "drop_last",
              "drop_last with fewer samples than a window");
  checkThrows([] { WindowCursor(0, 2, false); }, "empty", "empty dataset");
  checkThrows([] { WindowCursor(4, 0, false); }, "micro-batch",
              "micro-batch 0");
}

void accumulation() {
  AccumulationSchedule constant(3);
  check(constant.at(0) == 3 && constant.at(1000) == 3 && constant.max() == 3,
        "constant K");

  AccumulationSchedule ramp = AccumulationSchedule::parse("0:2,100:4,200:8");
  check(ramp.at(0) == 2 && ramp.at(99) == 2, "ramp before step 100");
  check(ramp.at(100) == 4 && ramp.at(199) == 4, "ramp from step 100");
  check(ramp.at(200) == 8 && ramp.at(5000) == 8, "ramp from step 200");
  check(ramp.max() == 8, "ramp maximum");

  for (const char *bad :
       {"", "1:2", "0:2,0:4", "0:2,50:3,40:4", "0:0", "0:x", "0:2,", "0-2"})
    checkThrows([&] { AccumulationSchedule::parse(bad); },
                "accumulation_schedule", std::string("schedule '") + bad + "'");
  checkThrows([] { AccumulationSchedule(0); }, "accumulation_steps", "K = 0");
}

bool near(double a, double b) { return std::fabs(a - b) <= 1e-12; }

void learningRates() {
  LRSchedule constant(LRSchedule::Kind::Constant, 0.1);
  check(constant.at(0) == 0.1 && constant.at(12345) == 0.1, "constant lr");

  // Warmup over 10 steps, then decay to 0 at step 110.
  LRSchedule linear(LRSchedule::Kind::Linear, 2.0, 10, 110);
  check(linear.at(0) == 0.0, "linear: 0 at step 0");
  check(near(linear.at(5), 1.0), "linear: half-way through the warmup");
  check(near(linear.at(10), 2.0), "linear: the peak after the warmup");
  check(near(linear.at(35), 1.5), "linear: a quarter into the decay");
  check(near(linear.at(60), 1.0), "linear: half-way through the decay");
  check(linear.at(110) == 0.0 && linear.at(500) == 0.0,
        "linear: 0 from the last step on");

  LRSchedule cosine(LRSchedule::Kind::Cosine, 2.0, 10, 110);
  check(near(cosine.at(5), 1.0), "cosine: half-way through the warmup");
  check(near(cosine.at(10), 2.0), "cosine: the peak after the warmup");
  check(near(cosine.at(60), 1.0), "cosine: lr / 2 half-way through");
  // (1 + cos(pi / 4)) / 2 a quarter of the way.
  check(near(cosine.at(35), 1.0 + std::sqrt(0.5)), "cosine: a quarter in");
  check(std::fabs(cosine.at(110)) <= 1e-12, "cosine: 0 at the last step");

  check(LRSchedule::parseKind("cosine") == LRSchedule::Kind::Cosine,
        "parse cosine");
  checkThrows([] { LRSchedule::parseKind("step"); }, "lr_schedule",
              "unknown schedule");
  checkThrows([] { LRSchedule(LRSchedule::Kind::Linear, 1.0, 10, 10); },
              "must exceed its warmup", "total = warmup");
  checkThrows([] { LRSchedule(LRSchedule::Kind::Linear, 1.0, -1, 10); },
              "warmup_steps", "negative warmup");
}

void sessionSettings() {
  SessionOptions o;
  o.set("steps", "12");
  o.set("accumulation_steps", " 4 ");
  o.set("lr", "2.5e-3");
  o.set("lr_schedule", "cosine");
  o.set("drop_last", "true");
  o.set("device", "cuda");
  o.set("log", "m.jsonl");
  check(o.steps == 12 && o.accumulationSteps == 4 && o.lr == 2.5e-3 &&
            o.lrSchedule == LRSchedule::Kind::Cosine && o.dropLast &&
            o.device == Device::CUDA && o.log == "m.jsonl",
        "session settings read into their fields");
  o.set("drop_last", "0");
  check(!o.dropLast, "drop_last false");

  checkThrows([&] { o.set("steps", "ten"); }, "expects an integer, got 'ten'",
              "steps ten");
  checkThrows([&] { o.set("steps", "99999999999999999999"); },
              "expects an integer", "steps out of range");
  checkThrows([&] { o.set("lr", "1e999"); }, "expects a number", "lr inf");
  checkThrows([&] { o.set("lr_schedule", "step"); },
              "must be constant, linear or cosine, not 'step'", "schedule");
  checkThrows([&] { o.set("device", "tpu"); }, "must be cpu or cuda",
              "device tpu");
  checkThrows([&] { o.set("resume", "yes"); }, "expects true or false",
              "resume yes");
  checkThrows([&] { o.set("stepz", "1"); },
              "unknown setting 'stepz' (known: steps, accumulation_steps",
              "unknown setting");
  checkThrows([&] { o.set("drop-last", "true"); },
              "unknown setting 'drop-last'", "set() takes names as they are");

  const std::vector<std::string> &names = SessionOptions::settingNames();
  check(names.size() == 17 && names.front() == "steps" &&
            names.back() == "flush_denormals",
        "the session's 17 setting names");
}

} // namespace

int main() {
  windows();
  accumulation();
  learningRates();
  sessionSettings();
  if (failures)
    return 1;
  std::printf("runtime units: all checks passed\n");
  return 0;
}
