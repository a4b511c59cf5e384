//===- Data.cpp - windows over a dataset, accumulation schedules -*- C++ -*-===//

#include "accrue-runtime/Runtime.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

using namespace accrue::rt;

WindowCursor::WindowCursor(int64_t numSamples, int64_t microBatch,
                           bool dropLast)
    : numSamples(numSamples), microBatch(microBatch), dropLast(dropLast) {
  if (numSamples <= 0)
    throw Error("the dataset is empty");
  if (microBatch <= 0)
    throw Error("the micro-batch must be positive");
}

Window WindowCursor::next(int64_t k) {
  int64_t size = microBatch * k;
  if (dropLast && numSamples < size)
    throw Error("the dataset has " + std::to_string(numSamples) +
                " samples, fewer than one effective batch of " +
                std::to_string(size) + " (micro-batch " +
                std::to_string(microBatch) + " x " + std::to_string(k) +
                " accumulation steps), and --drop-last skips partial ones");
  int64_t remaining = numSamples - offset;
  if (remaining < size && dropLast) {
    ++epoch;
    offset = 0;
    remaining = numSamples;
  }
  Window w;
  w.first = offset;
  w.epoch = epoch;
  w.valid = std::min(remaining, size);
  w.samples = (w.valid + microBatch - 1) / microBatch * microBatch;
  offset += w.valid;
  if (offset == numSamples) {
    ++epoch;
    offset = 0;
  }
  return w;
}

int64_t WindowCursor::windowsPerEpoch(int64_t k) const {
  int64_t size = microBatch * k;
  return dropLast ? numSamples / size : (numSamples + size - 1) / size;
}

AccumulationSchedule::AccumulationSchedule(int64_t k) : points{{0, k}} {
  if (k < 1)
    throw Error("accumulation steps must be >= 1, got " + std::to_string(k));
}

AccumulationSchedule AccumulationSchedule::parse(const std::string &text) {
  AccumulationSchedule schedule;
  schedule.points.clear();
  auto fail = [&](const std::string &why) -> Error {
    return Error("--accumulation-schedule '" + text + "': " + why +
                 " (expected STEP:K,STEP:K,... from step 0, e.g. "
                 "0:2,100:4,200:8)");
  };
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item =
        text.substr(pos, comma == std::string::npos ? std::string::npos
                                                    : comma - pos);
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
      throw fail(schedule.points.empty()
                     ? "the first entry must be for step 0"
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
