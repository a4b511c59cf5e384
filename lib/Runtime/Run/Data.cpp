//===- Data.cpp - windows over a dataset ------------------------*- C++ -*-===//

#include "accrue-runtime/Session.h"

#include <algorithm>
#include <cmath>

using namespace accrue::rt;

WindowCursor::WindowCursor(int64_t numSamples, int64_t microBatch,
                           bool dropLast)
    : numSamples(numSamples), microBatch(microBatch), dropLast(dropLast) {
  if (numSamples <= 0)
    throw Error("the dataset is empty");
  if (microBatch <= 0)
    throw Error("the micro-batch must be positive");
}

Window WindowCursor::next(int64_t size) {
  if (dropLast && numSamples < size)
    throw Error("the dataset has " + std::to_string(numSamples) +
                " samples, fewer than one effective batch of " +
                std::to_string(size) + ", and " + settingRef("drop_last") +
                " skips partial ones");
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

//===----------------------------------------------------------------------===//
// Dataset
//===----------------------------------------------------------------------===//

namespace {

/// Refuses the first value of `array` (the data of integer batch input
/// `input`) outside a range the step needs: a token id past an embedding's
/// table would train row 0 silently, a label past the classes read another
/// class's score.
template <typename T>
void checkIndicesOf(const Array &array, const ArgSpec &input,
                    const std::string &what) {
  const T *v = array.as<T>();
  int64_t count = array.numElements();
  int64_t rowSize = count / std::max<int64_t>(array.shape[0], 1);
  for (const IndexCheck &check : input.indexChecks)
    for (int64_t i = 0; i < count; ++i) {
      int64_t value = static_cast<int64_t>(v[i]);
      if (check.accepts(value))
        continue;
      throw Error(what + " holds " + std::to_string(value) + " at sample " +
                  std::to_string(i / std::max<int64_t>(rowSize, 1)) +
                  ", outside [" + std::to_string(check.low) + ", " +
                  std::to_string(check.high) + "): the values index " +
                  check.what +
                  (check.ignore ? " (or equal its ignore_index " +
                                      std::to_string(*check.ignore) + ")"
                                : std::string()));
    }
}

void checkIndices(const Array &array, const ArgSpec &input,
                  const std::string &what) {
  if (input.dtype == ACCRUE_DTYPE_INT64)
    checkIndicesOf<int64_t>(array, input, what);
  else if (input.dtype == ACCRUE_DTYPE_INT32)
    checkIndicesOf<int32_t>(array, input, what);
}

} // namespace

Dataset Dataset::fromArrays(std::map<std::string, Array> arrays,
                            const Manifest &artifact, const std::string &what) {
  Dataset data;
  data.what = what;
  std::string names;
  for (const ArgSpec *input : artifact.batchInputs())
    names += (names.empty() ? "" : ", ") + input->name;
  for (const ArgSpec *input : artifact.batchInputs()) {
    auto it = arrays.find(input->name);
    if (it == arrays.end())
      throw Error(what + " has no array '" + input->name +
                  "' (the model's inputs: " + names + ")");
    std::string array = what + " array '" + input->name + "'";
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
      throw Error(array + " has shape " + shapeText(raw.shape, false) +
                  ", expected " + shapeText(input->shape, true));
    // Take the array over (no copy) when it has the input's dtype already.
    Array converted = raw.dtype == input->dtype
                          ? std::move(it->second)
                          : raw.convertTo(input->dtype, array);
    if (input->dtype == ACCRUE_DTYPE_FLOAT32) {
      const float *v = converted.as<float>();
      int64_t rowSize =
          converted.numElements() / std::max<int64_t>(converted.shape[0], 1);
      for (int64_t i = 0; i < converted.numElements(); ++i)
        if (!std::isfinite(v[i]))
          throw Error(array + " contains " +
                      (std::isnan(v[i]) ? "NaN" : "Inf") + " at sample " +
                      std::to_string(i / std::max<int64_t>(rowSize, 1)));
    }
    checkIndices(converted, *input, array);
    if (!data.arrays.empty() && converted.shape[0] != data.numSamples)
      throw Error(array + " has " + std::to_string(converted.shape[0]) +
                  " samples but the other arrays have " +
                  std::to_string(data.numSamples));
    data.numSamples = converted.shape[0];
    data.arrays.push_back(std::move(converted));
  }
  return data;
}

Dataset Dataset::fromNpz(const std::string &path, const Manifest &artifact) {
  return fromArrays(readNpz(path), artifact, "'" + path + "'");
}
