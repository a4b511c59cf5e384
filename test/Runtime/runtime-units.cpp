//===- runtime-units.cpp - unit tests of the runtime's schedules ----------===//
//
// The window cursor, the accumulation schedule, the learning-rate
// schedules and the session's settings against values worked out by hand
// from their definitions (the
// LR schedules are transformers' get_{linear,cosine}_schedule_with_warmup;
// the cosine one's value at the middle of the decay is lr / 2), and the
// counting emulator's counter against the sectors a warp's request touches
// by the GPU's rules (32 consecutive threads of a block, 32-byte sectors),
// the first host of Slurm node lists, and the host backend's buffers
// (zeroed; those of 2 MiB or more on a huge-page boundary and, where the
// kernel has transparent huge pages, marked for them in /proc/self/smaps).
// Run by test/Runtime/units.test; prints each failed check and exits 1.
//
//===----------------------------------------------------------------------===//

#include "accrue-runtime/Session.h"
#include "accrue-runtime/StepABI.h"

#include "Gemm.h"
#include "Launch.h"
#include "Run/AccessCounter.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
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
  check(names.size() == 18 && names.front() == "steps" &&
            names.back() == "flush_denormals",
        "the session's 18 setting names");
  SessionOptions alone;
  alone.set("resume_new_batch", "true");
  checkThrows([&] { alone.validate(); }, "resume_new_batch needs resume",
              "resume_new_batch without resume");
}

/// One launch of a kernel `block` threads wide (x, y) and `blocks` blocks
/// wide, whose thread (block, x, y) runs `body(thread)`; returns the
/// profile of its kernel.
template <typename F>
nlohmann::json countLaunch(AccessCounter &counter, int64_t blocks, int64_t bx,
                           int64_t by, F body) {
  static const char names[] = "k0_test\0test/node";
  const int64_t grid[3] = {blocks, 1, 1}, block[3] = {bx, by, 1};
  counter.launch(0, names, grid, block);
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t y = 0; y < by; ++y)
      for (int64_t x = 0; x < bx; ++x) {
        const int64_t ids[6] = {b, 0, 0, x, y, 0};
        counter.thread(ids);
        body(b * bx * by + y * bx + x, x, y);
      }
  counter.launchEnd();
  return nlohmann::json::parse(counter.profileJson()).at("kernels").at(0);
}

/// A load (or store) of `bytes` at byte `offset` of step argument 0.
void load(AccessCounter &c, int64_t site, int64_t offset, int64_t bytes = 4,
          bool store = false) {
  static std::vector<char> memory(1 << 24);
  c.access(site, 0, offset, reinterpret_cast<int64_t>(memory.data()) + offset,
           bytes,
           (store ? ACCRUE_EMU_STORE : 0) | ACCRUE_EMU_IN_BOUNDS |
               (std::min<int64_t>(bytes, 4) << ACCRUE_EMU_ELEMENT_SHIFT));
}

void checkSite(const nlohmann::json &kernel, int64_t requests, int64_t sectors,
               std::optional<double> efficiency, const std::string &what) {
  const nlohmann::json &site = kernel.at("accesses_by_site").at(0);
  bool ok = site.at("requests") == requests && site.at("sectors") == sectors;
  if (efficiency)
    ok &= site.at("sector_efficiency").is_number() &&
          std::fabs(site.at("sector_efficiency").get<double>() - *efficiency) <
              1e-12;
  else
    ok &= site.at("sector_efficiency").is_null();
  check(ok, what + ": got " + site.dump());
}

void accessCounter() {
  auto fresh = [] { return AccessCounter(std::nullopt); };
  {
    // 64 threads read consecutive floats: 2 warps of 128 bytes, 4 sectors
    // each, every byte used.
    AccessCounter c = fresh();
    auto k = countLaunch(c, 1, 64, 1,
                         [&](int64_t t, auto, auto) { load(c, 0, 4 * t); });
    checkSite(k, 2, 8, 1.0, "coalesced f32");
    check(k.at("unique_bytes") == 256 && k.at("longest_chain") == 1,
          "coalesced f32 unique bytes and chain: " + k.dump());
  }
  {
    // Every other float: a warp spans 256 bytes (8 sectors) and uses half.
    AccessCounter c = fresh();
    checkSite(countLaunch(c, 1, 64, 1,
                          [&](int64_t t, auto, auto) { load(c, 0, 8 * t); }),
              2, 16, 0.5, "stride 2 f32");
  }
  {
    // A column of a row-major 1024-wide matrix: one sector per lane, 4 of
    // its 32 bytes used.
    AccessCounter c = fresh();
    checkSite(countLaunch(c, 1, 32, 1,
                          [&](int64_t t, auto, auto) { load(c, 0, 4096 * t); }),
              1, 32, 0.125, "column of floats");
  }
  {
    // One address for the whole warp: a broadcast, one sector, no
    // efficiency to speak of.
    AccessCounter c = fresh();
    auto k =
        countLaunch(c, 1, 64, 1, [&](int64_t, auto, auto) { load(c, 0, 0); });
    checkSite(k, 2, 2, std::nullopt, "broadcast");
    check(k.at("accesses_by_site").at(0).at("broadcast_requests") == 2,
          "broadcast requests: " + k.dump());
  }
  {
    // bf16: 32 lanes x 2 bytes are 2 sectors.
    AccessCounter c = fresh();
    checkSite(countLaunch(c, 1, 32, 1,
                          [&](int64_t t, auto, auto) { load(c, 0, 2 * t, 2); }),
              1, 2, 1.0, "coalesced bf16");
  }
  {
    // 16 bytes off a sector boundary: [16, 144) touches 5 sectors.
    AccessCounter c = fresh();
    checkSite(
        countLaunch(c, 1, 32, 1,
                    [&](int64_t t, auto, auto) { load(c, 0, 16 + 4 * t); }),
        1, 5, 128.0 / 160.0, "misaligned f32");
  }
  {
    // 16-byte vectors: 32 lanes x 16 bytes are 16 sectors.
    AccessCounter c = fresh();
    checkSite(
        countLaunch(c, 1, 32, 1,
                    [&](int64_t t, auto, auto) { load(c, 0, 16 * t, 16); }),
        1, 16, 1.0, "float4");
  }
  {
    // A loop of 3 iterations per thread: one request per iteration and
    // warp; the chain is 3.
    AccessCounter c = fresh();
    auto k = countLaunch(c, 1, 64, 1, [&](int64_t t, auto, auto) {
      for (int64_t i = 0; i < 3; ++i)
        load(c, 0, 4 * (t + 64 * i));
    });
    checkSite(k, 6, 24, 1.0, "loop");
    check(k.at("longest_chain") == 3 && k.at("unique_bytes") == 768,
          "loop chain and unique bytes: " + k.dump());
  }
  {
    // 40 threads: a full warp and one of 8 lanes (32 bytes, 1 sector).
    AccessCounter c = fresh();
    checkSite(countLaunch(c, 1, 40, 1,
                          [&](int64_t t, auto, auto) { load(c, 0, 4 * t); }),
              2, 5, 1.0, "partial warp");
  }
  {
    // Blocks of 16 x 4 threads: warps follow the linear id (x fastest), so
    // row-major (x + 16 y) is coalesced and column-major (y + 4 x) is not.
    AccessCounter c = fresh();
    checkSite(countLaunch(c, 1, 16, 4,
                          [&](int64_t, int64_t x, int64_t y) {
                            load(c, 0, 4 * (x + 16 * y));
                          }),
              2, 8, 1.0, "2-d block, x fastest");
    AccessCounter d = fresh();
    // Lanes 0..31 are x 0..15 at y 0 and 1: addresses 4 (y + 4 x) use 8
    // of every 16 bytes of [0, 256): 8 sectors, half used.
    checkSite(countLaunch(d, 1, 16, 4,
                          [&](int64_t, int64_t x, int64_t y) {
                            load(d, 0, 4 * (y + 4 * x));
                          }),
              2, 16, 0.5, "2-d block, y fastest");
  }
  {
    // One thread that reads and writes its own elements, and threads that
    // read one element together, do not race.
    AccessCounter c = fresh();
    countLaunch(c, 2, 32, 1, [&](int64_t t, auto, auto) {
      load(c, 0, 4 * t);
      load(c, 1, 4 * t, 4, /*store=*/true);
      load(c, 2, 1 << 20);
    });
    check(!c.takeError(), "own elements and shared reads: no race");
  }
  {
    // Two threads of one launch write one element.
    AccessCounter c = fresh();
    countLaunch(c, 1, 32, 1, [&](int64_t t, auto, auto) {
      load(c, 0, 4 * (t / 2), 4, /*store=*/true);
    });
    std::optional<std::string> error = c.takeError();
    check(error &&
              error->find("a data race in kernel k0_test (ONNX node "
                          "'test/node'), access 0") != std::string::npos &&
              error->find("thread 1 of block 0 writes the element that "
                          "thread 0 of block 0 writes") != std::string::npos,
          "write-write race: " + error.value_or("none"));
  }
  {
    // Thread 5 of block 1 writes what thread 0 of block 0 read.
    AccessCounter c = fresh();
    countLaunch(c, 2, 32, 1, [&](int64_t t, auto, auto) {
      if (t == 0)
        load(c, 0, 400);
      if (t == 37)
        load(c, 1, 400, 4, /*store=*/true);
    });
    std::optional<std::string> error = c.takeError();
    check(error &&
              error->find("thread 5 of block 1 writes the element that "
                          "thread 0 of block 0 reads") != std::string::npos,
          "read-write race: " + error.value_or("none"));
    // Launches do not see each other's accesses.
    countLaunch(c, 1, 1, 1,
                [&](auto, auto, auto) { load(c, 0, 400, 4, true); });
    countLaunch(c, 1, 2, 1,
                [&](int64_t t, auto, auto) { load(c, 0, 400 + 4 * t); });
    check(!c.takeError(), "separate launches: no race");
  }
  {
    // An access outside its view.
    AccessCounter c = fresh();
    countLaunch(c, 1, 1, 1, [&](auto, auto, auto) {
      c.access(3, 0, 64, 64, 4, 4 << ACCRUE_EMU_ELEMENT_SHIFT);
    });
    std::optional<std::string> error = c.takeError();
    check(error &&
              error->find("an out-of-bounds load in kernel k0_test (ONNX "
                          "node 'test/node'), access 3") != std::string::npos,
          "out of bounds: " + error.value_or("none"));
  }
}

} // namespace

/// The host GEMM checks the compiler's claim that f32 inputs hold bf16 or
/// f16 values: the GPU multiplies such inputs in that precision.
void exactGemmInputs() {
  // A 1x2 times B 2x1, row-major; f32 inputs marked exact in `exact`.
  auto product = [](float a0, float a1, AccrueDType exact) {
    float a[2] = {a0, a1}, b[2] = {3.0f, 1.0f}, c[1] = {0.0f};
    int64_t types = int64_t(exact) << 16;
    GemmPlan plan = planGemm(1, 1, 1, 2, intptr_t(a), 2, 1, 0, intptr_t(b), 1,
                             1, 0, intptr_t(c), 1, 1, 0, types, 0.0f);
    runGemmOnHost(plan);
    return c[0];
  };
  // 1 + 2^-7 has 8 significant bits (bf16's), 1 + 2^-8 has 9.
  float bf16 = 1.0f + std::ldexp(1.0f, -7),
        notBf16 = 1.0f + std::ldexp(1.0f, -8);
  check(product(bf16, -2.0f, ACCRUE_DTYPE_BFLOAT16) == 3 * bf16 - 2,
        "bf16-exact inputs multiply");
  checkThrows([&] { product(notBf16, 1.0f, ACCRUE_DTYPE_BFLOAT16); },
              "GEMM input A holds 1.003906, not exact in bf16",
              "an input marked bf16-exact that is not");
  check(product(notBf16, 1.0f, ACCRUE_DTYPE_FLOAT32) == 3 * notBf16 + 1,
        "unmarked f32 inputs are not checked");
  // f16: 11 significant bits, at most 65504, spacing 2^-24 at the bottom.
  float f16 = 1.0f + std::ldexp(1.0f, -10);
  check(product(f16, 65504.0f, ACCRUE_DTYPE_FLOAT16) == 3 * f16 + 65504.0f,
        "f16-exact inputs multiply");
  check(product(std::ldexp(3.0f, -24), 0.0f, ACCRUE_DTYPE_FLOAT16) ==
            std::ldexp(9.0f, -24),
        "an f16 subnormal is exact");
  checkThrows(
      [&] { product(1.0f + std::ldexp(1.0f, -11), 0, ACCRUE_DTYPE_FLOAT16); },
      "not exact in f16", "12 significant bits");
  checkThrows([&] { product(std::ldexp(1.0f, -25), 0, ACCRUE_DTYPE_FLOAT16); },
              "not exact in f16", "below f16's smallest subnormal");
  checkThrows([&] { product(65520.0f, 0, ACCRUE_DTYPE_FLOAT16); },
              "not exact in f16", "above f16's largest value");
}

/// A GEMM writing bf16 or f16 rounds the f32 sum once, to nearest even, as
/// cuBLASLt converts CUBLAS_COMPUTE_32F for a narrower D; it starts from
/// zero only.
void narrowGemmOutputs() {
  // 1x2 times 2x1: a0 * 1 + a1 * 1, written in `out`'s type.
  auto product = [](float a0, float a1, AccrueDType out, float beta = 0) {
    float a[2] = {a0, a1}, b[2] = {1.0f, 1.0f};
    uint16_t c[1] = {0};
    int64_t types = int64_t(out) << 8;
    GemmPlan plan = planGemm(1, 1, 1, 2, intptr_t(a), 2, 1, 0, intptr_t(b), 1,
                             1, 0, intptr_t(c), 1, 1, 0, types, beta);
    runGemmOnHost(plan);
    return c[0];
  };
  // bf16 keeps 8 significant bits: 1 + 2^-8 is halfway between 1 (0x3f80,
  // even) and 1 + 2^-7 (0x3f81); 1 + 3 * 2^-8 is halfway between 0x3f81
  // and 0x3f82 (even); 1 + 2^-8 + 2^-20 is above halfway.
  check(product(1.0f, std::ldexp(1.0f, -8), ACCRUE_DTYPE_BFLOAT16) == 0x3f80,
        "bf16: a tie rounds to the even 1");
  check(product(1.0f, 3 * std::ldexp(1.0f, -8), ACCRUE_DTYPE_BFLOAT16) ==
            0x3f82,
        "bf16: a tie rounds up to the even neighbour");
  check(product(1.0f, std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20),
                ACCRUE_DTYPE_BFLOAT16) == 0x3f81,
        "bf16: above halfway rounds up");
  check(product(-2.0f, 0.0f, ACCRUE_DTYPE_BFLOAT16) == 0xc000, "bf16: -2");
  // f16 keeps 11: 1 + 2^-11 ties to 1 (0x3c00), 1 + 3 * 2^-11 to 0x3c02;
  // 65520 and above overflow to infinity (0x7c00).
  check(product(1.0f, std::ldexp(1.0f, -11), ACCRUE_DTYPE_FLOAT16) == 0x3c00,
        "f16: a tie rounds to the even 1");
  check(product(1.0f, 3 * std::ldexp(1.0f, -11), ACCRUE_DTYPE_FLOAT16) ==
            0x3c02,
        "f16: a tie rounds up to the even neighbour");
  check(product(65520.0f, 0.0f, ACCRUE_DTYPE_FLOAT16) == 0x7c00,
        "f16: overflow is infinity");
  checkThrows([&] { product(1.0f, 1.0f, ACCRUE_DTYPE_BFLOAT16, 1.0f); },
              "a GEMM writing bf16 or f16 starts from zero",
              "a narrow output added to");
}

/// A GEMM's bias-gradient epilogue: the sums over k of A's rows (m values)
/// or of B's columns (n values), whichever way the plan reads the operands
/// (a row-major output is computed as D^T = B^T A^T, a column-major one
/// directly), with the product unchanged.
void gemmBiasGradients() {
  // A 3x4, B 4x2, both row-major, of small integers: every sum is exact.
  float a[12], b[8];
  for (int i = 0; i < 12; ++i)
    a[i] = float((i * 7) % 5) - 2.0f;
  for (int i = 0; i < 8; ++i)
    b[i] = float((i * 3) % 7) - 3.0f;
  for (bool rowMajorC : {true, false})
    for (AccrueGemmEpilogue which : {ACCRUE_GEMM_EPILOGUE_BIAS_GRADIENT_A,
                                     ACCRUE_GEMM_EPILOGUE_BIAS_GRADIENT_B}) {
      float c[6] = {}, bias[3] = {-1, -1, -1};
      int64_t cRow = rowMajorC ? 2 : 1, cCol = rowMajorC ? 1 : 3;
      int64_t types = int64_t(which) << 24;
      GemmPlan plan =
          planGemm(1, 3, 2, 4, intptr_t(a), 4, 1, 0, intptr_t(b), 2, 1, 0,
                   intptr_t(c), cRow, cCol, 0, types, 0.0f, intptr_t(bias));
      runGemmOnHost(plan);
      std::string what =
          std::string(rowMajorC ? "row" : "column") +
          "-major C, bias gradient of " +
          (which == ACCRUE_GEMM_EPILOGUE_BIAS_GRADIENT_A ? "A" : "B");
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 2; ++j) {
          double sum = 0;
          for (int l = 0; l < 4; ++l)
            sum += double(a[i * 4 + l]) * b[l * 2 + j];
          check(c[i * cRow + j * cCol] == float(sum), what + ": the product");
        }
      int64_t count = which == ACCRUE_GEMM_EPILOGUE_BIAS_GRADIENT_A ? 3 : 2;
      for (int x = 0; x < count; ++x) {
        double sum = 0;
        for (int l = 0; l < 4; ++l)
          sum += which == ACCRUE_GEMM_EPILOGUE_BIAS_GRADIENT_A ? a[x * 4 + l]
                                                               : b[l * 2 + x];
        check(bias[x] == float(sum), what + ": sum " + std::to_string(x));
      }
      if (count == 2)
        check(bias[2] == -1, what + ": nothing past the n sums");
    }
  float c[4], bias[2];
  checkThrows(
      [&] {
        planGemm(2, 1, 2, 4, intptr_t(a), 4, 1, 4, intptr_t(b), 2, 1, 0,
                 intptr_t(c), 2, 1, 2,
                 int64_t(ACCRUE_GEMM_EPILOGUE_BIAS_GRADIENT_B) << 24, 0.0f,
                 intptr_t(bias));
      },
      "needs batch 1", "a batched bias gradient");
  checkThrows(
      [&] {
        planGemm(1, 1, 2, 4, intptr_t(a), 4, 1, 0, intptr_t(b), 2, 1, 0,
                 intptr_t(c), 2, 1, 0, int64_t(9) << 24, 0.0f, intptr_t(bias));
      },
      "unknown GEMM epilogue 9", "an unknown epilogue");
}

/// Slurm node lists (scontrol's hostlist syntax) to their first host, the
/// rendezvous host of an srun launch without MASTER_ADDR.
void slurmFirstHost() {
  std::pair<const char *, const char *> cases[] = {
      {"localhost", "localhost"},       {"localhost,node[2-3]", "localhost"},
      {"gpu[03-05,07],cpu1", "gpu03"},  {"gpu[07,03-05]", "gpu07"},
      {"node[01-02]-ib", "node01-ib"},  {"node[01-02]-ib,login1", "node01-ib"},
      {"rack1-node[9]", "rack1-node9"},
  };
  for (auto [list, host] : cases)
    check(firstHost(list) == host,
          std::string("the first host of ") + list + ": " + firstHost(list));
}

/// The VmFlags of the mapping of /proc/self/smaps that holds `address`
/// ("" if none does or there is no such file).
std::string vmFlagsAt(const void *address) {
  std::ifstream smaps("/proc/self/smaps");
  uintptr_t at = reinterpret_cast<uintptr_t>(address);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long begin, end;
    char dash;
    std::istringstream range(line);
    if (range >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin <= at && at < end;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0)
      return line.substr(8) + " ";
  }
  return "";
}

/// The host backend's buffers: zeroed; those of a huge page or more start
/// on a 2 MiB boundary and ask for transparent huge pages (the kernel's
/// `hg` flag on their mapping).
void hostBuffers() {
  std::unique_ptr<Backend> host = Backend::create(Device::CPU);
  size_t big = (size_t(3) << 20) + 4;
  {
    Buffer buffer(*host, big);
    auto address = reinterpret_cast<uintptr_t>(buffer.data());
    check(address % (size_t(2) << 20) == 0,
          "a 3 MiB buffer starts on a 2 MiB boundary");
    const unsigned char *bytes = static_cast<unsigned char *>(buffer.data());
    bool zero = true;
    for (size_t i = 0; i < big; i += 4093)
      zero &= bytes[i] == 0;
    check(zero && bytes[big - 1] == 0, "a 3 MiB buffer is zeroed");
    if (std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled")) {
      std::string flags = vmFlagsAt(buffer.data());
      check(flags.find(" hg ") != std::string::npos,
            "a 3 MiB buffer's mapping asks for huge pages: VmFlags" + flags);
    }
  }
  Buffer small(*host, 100);
  check(reinterpret_cast<uintptr_t>(small.data()) % 64 == 0,
        "a 100-byte buffer is 64-byte aligned");
}

int main() {
  windows();
  accumulation();
  learningRates();
  sessionSettings();
  accessCounter();
  exactGemmInputs();
  narrowGemmOutputs();
  gemmBiasGradients();
  slurmFirstHost();
  hostBuffers();
  if (failures)
    return 1;
  std::printf("runtime units: all checks passed\n");
  return 0;
}
