//===- OnnxExport.cpp - write trained values into an ONNX model -*- C++ -*-===//
//
// accrue-compile stores trainable initializers as raw_data, so exporting is
// overwriting those bytes in place: a walk over the protobuf wire format
// (ModelProto.graph = 7, GraphProto.initializer = 5, TensorProto.name = 8,
// TensorProto.raw_data = 9) finds them, no protobuf library needed.
//
//===----------------------------------------------------------------------===//

#include "accrue-runtime/Runtime.h"

#include <cstring>

using namespace accrue::rt;

namespace {

struct Reader {
  const std::string &bytes;
  size_t pos, end;

  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= end)
        throw Error("model.onnx is truncated");
      uint8_t byte = bytes[pos++];
      value |= uint64_t(byte & 0x7f) << shift;
      if (!(byte & 0x80))
        return value;
    }
    throw Error("model.onnx is corrupt (varint)");
  }

  /// Skips a field of `wireType`; returns [start, end) of a length-delimited
  /// payload.
  std::pair<size_t, size_t> field(int wireType) {
    switch (wireType) {
    case 0:
      varint();
      return {pos, pos};
    case 1:
      pos += 8;
      break;
    case 5:
      pos += 4;
      break;
    case 2: {
      uint64_t len = varint();
      if (len > end - pos)
        throw Error("model.onnx is truncated");
      size_t start = pos;
      pos += len;
      return {start, pos};
    }
    default:
      throw Error("model.onnx is corrupt (wire type)");
    }
    if (pos > end)
      throw Error("model.onnx is truncated");
    return {pos, pos};
  }
};

/// Calls `visit(fieldNumber, start, end)` for each length-delimited field in
/// [start, end).
template <typename Fn>
void forEachMessageField(const std::string &bytes, size_t start, size_t end,
                         Fn visit) {
  Reader r{bytes, start, end};
  while (r.pos < end) {
    uint64_t tag = r.varint();
    auto [s, e] = r.field(tag & 7);
    if ((tag & 7) == 2)
      visit(tag >> 3, s, e);
  }
}

} // namespace

std::string accrue::rt::patchOnnxInitializers(
    const std::string &model,
    const std::map<std::string, std::pair<const float *, int64_t>> &values) {
  std::string out = model;
  std::map<std::string, bool> done;
  forEachMessageField(
      model, 0, model.size(), [&](uint64_t f, size_t gs, size_t ge) {
        if (f != 7) // graph
          return;
        forEachMessageField(
            model, gs, ge, [&](uint64_t g, size_t ts, size_t te) {
              if (g != 5) // initializer
                return;
              std::string name;
              size_t rawStart = 0, rawEnd = 0;
              bool hasRaw = false;
              forEachMessageField(model, ts, te,
                                  [&](uint64_t t, size_t s, size_t e) {
                                    if (t == 8)
                                      name = model.substr(s, e - s);
                                    else if (t == 9) {
                                      rawStart = s;
                                      rawEnd = e;
                                      hasRaw = true;
                                    }
                                  });
              auto it = values.find(name);
              if (it == values.end())
                return;
              size_t bytes = it->second.second * sizeof(float);
              if (!hasRaw || rawEnd - rawStart != bytes)
                throw Error("model.onnx: initializer '" + name +
                            "' does not hold its values as raw_data of the "
                            "expected size");
              std::memcpy(out.data() + rawStart, it->second.first, bytes);
              done[name] = true;
            });
      });
  for (const auto &entry : values)
    if (!done.count(entry.first))
      throw Error("model.onnx has no initializer '" + entry.first + "'");
  return out;
}
