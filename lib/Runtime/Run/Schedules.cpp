//===- Schedules.cpp - learning-rate and accumulation schedules -*- C++ -*-===//
//
// Both are functions of the number of completed optimizer steps s.
//
// The step after s completed optimizer steps uses lr(s): linear warmup
// lr * s / W for s < W, then lr * max(0, (T - s) / (T - W)) (linear) or
// lr * (1 + cos(pi * (s - W) / (T - W))) / 2 (cosine). These are
// transformers' get_{linear,cosine}_schedule_with_warmup on top of
// torch.optim.lr_scheduler.LambdaLR.
//
// An accumulation schedule STEP:K,STEP:K,... gives the step after s
// completed ones the K of the last entry with STEP <= s (the first entry is
// for step 0): "0:2,100:4,200:8" ramps the batch up.
//
//===----------------------------------------------------------------------===//

#include "accrue-runtime/Session.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

using namespace accrue::rt;

LRSchedule::LRSchedule(Kind kind, double lr, int64_t warmup, int64_t total)
    : kind(kind), lr(lr), warmup(warmup), total(total) {
  if (warmup < 0)
    throw Error(settingRef("warmup_steps") + " must be >= 0");
  if (kind != Kind::Constant && total <= warmup)
    throw Error("the schedule's total steps (" + std::to_string(total) +
                ") must exceed its warmup steps (" + std::to_string(warmup) +
                ")");
}

LRSchedule::Kind LRSchedule::parseKind(const std::string &name) {
  if (name == "constant")
    return Kind::Constant;
  if (name == "linear")
    return Kind::Linear;
  if (name == "cosine")
    return Kind::Cosine;
  throw Error(settingRef("lr_schedule") +
              " must be constant, linear or cosine, not '" + name + "'");
}

const char *LRSchedule::kindName(Kind kind) {
  switch (kind) {
  case Kind::Constant:
    return "constant";
  case Kind::Linear:
    return "linear";
  case Kind::Cosine:
    return "cosine";
  }
  return "?";
}

double LRSchedule::at(int64_t s) const {
  if (kind == Kind::Constant)
    return lr;
  if (s < warmup)
    return lr * static_cast<double>(s) / static_cast<double>(warmup);
  double progress =
      static_cast<double>(s - warmup) / static_cast<double>(total - warmup);
  if (kind == Kind::Linear)
    return lr * std::max(0.0, 1.0 - progress);
  const double pi = 3.14159265358979323846;
  return lr * 0.5 * (1.0 + std::cos(pi * progress));
}

AccumulationSchedule::AccumulationSchedule(int64_t k) : points{{0, k}} {
  if (k < 1)
    throw Error(settingRef("accumulation_steps") + " must be >= 1, got " +
                std::to_string(k));
}

AccumulationSchedule AccumulationSchedule::parse(const std::string &text) {
  AccumulationSchedule schedule;
  schedule.points.clear();
  auto fail = [&](const std::string &why) -> Error {
    return Error(settingRef("accumulation_schedule") + " '" + text +
                 "': " + why +
                 " (expected STEP:K,STEP:K,... from step 0, e.g. "
                 "0:2,100:4,200:8)");
  };
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(
        pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t colon = item.find(':');
    if (colon == std::string::npos)
      throw fail("'" + item + "' is not STEP:K");
    auto number = [&](const std::string &digits) {
      char *end = nullptr;
      errno = 0;
      long long v = std::strtoll(digits.c_str(), &end, 10);
      if (digits.empty() || errno || *end)
        throw fail("'" + digits + "' is not an integer");
      return static_cast<int64_t>(v);
    };
    int64_t step = number(item.substr(0, colon));
    int64_t k = number(item.substr(colon + 1));
    if (k < 1)
      throw fail("K must be >= 1");
    if (schedule.points.empty() ? step != 0
                                : step <= schedule.points.back().first)
      throw fail(schedule.points.empty() ? "the first entry must be for step 0"
                                         : "steps must increase");
    schedule.points.push_back({step, k});
    if (comma == std::string::npos)
      break;
    pos = comma + 1;
  }
  return schedule;
}

int64_t AccumulationSchedule::at(int64_t completedSteps) const {
  int64_t k = points.front().second;
  for (const auto &[step, value] : points)
    if (completedSteps >= step)
      k = value;
  return k;
}

int64_t AccumulationSchedule::max() const {
  int64_t k = 0;
  for (const auto &point : points)
    k = std::max(k, point.second);
  return k;
}
