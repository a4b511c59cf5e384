//===- Schedules.cpp - learning-rate schedules ------------------*- C++ -*-===//
//
// The formulas of ../shared/SEMANTICS.md ("Learning-rate schedules"), which
// are those of transformers' get_{linear,cosine}_schedule_with_warmup on top
// of torch.optim.lr_scheduler.LambdaLR.
//
//===----------------------------------------------------------------------===//

#include "accrue-runtime/Runtime.h"

#include <algorithm>
#include <cmath>

using namespace accrue::rt;

LRSchedule::LRSchedule(Kind kind, double lr, int64_t warmup, int64_t total)
    : kind(kind), lr(lr), warmup(warmup), total(total) {
  if (warmup < 0)
    throw Error("--warmup-steps must be >= 0");
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
  throw Error("--lr-schedule must be constant, linear or cosine, not '" +
              name + "'");
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
