//===- Schedules.cpp - learning-rate schedules ------------------*- C++ -*-===//
//
// The step after s completed optimizer steps uses lr(s): linear warmup
// lr * s / W for s < W, then lr * max(0, (T - s) / (T - W)) (linear) or
// lr * (1 + cos(pi * (s - W) / (T - W))) / 2 (cosine). These are
// transformers' get_{linear,cosine}_schedule_with_warmup on top of
// torch.optim.lr_scheduler.LambdaLR.
//
//===----------------------------------------------------------------------===//

#include "accrue-runtime/Session.h"

#include <algorithm>
#include <cmath>

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
  double progress = static_cast<double>(s - warmup) /
                    static_cast<double>(total - warmup);
  if (kind == Kind::Linear)
    return lr * std::max(0.0, 1.0 - progress);
  const double pi = 3.14159265358979323846;
  return lr * 0.5 * (1.0 + std::cos(pi * progress));
}
