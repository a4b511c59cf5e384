//===- Arrays.h - host arrays and the files that hold them ------*- C++ -*-===//
//
// Dense host arrays, .npz datasets, safetensors files (initial parameters,
// checkpoints) and atomic file writes. The compiler writes init.safetensors
// with the same writer the runtime uses for checkpoints.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_RUNTIME_ARRAYS_H
#define ACCRUE_RUNTIME_ARRAYS_H

#include "accrue-runtime/Error.h"
#include "accrue-runtime/StepABI.h"

#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace accrue::rt {

/// Element types the runtime moves around: the step contract's (StepABI.h).
using DType = AccrueDType;

/// Parses the manifest's spelling ("f32", "i64", ...); throws if unknown.
DType parseDType(const std::string &name);
const char *dtypeName(DType type);
size_t dtypeSize(DType type);

/// A dense, row-major host array.
struct Array {
  DType dtype = ACCRUE_DTYPE_FLOAT32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;

  int64_t numElements() const;
  /// Converts to `type` (numeric conversion; throws if impossible).
  Array convertTo(DType type, const std::string &what) const;
  template <typename T> T *as() { return reinterpret_cast<T *>(data.data()); }
  template <typename T> const T *as() const {
    return reinterpret_cast<const T *>(data.data());
  }
};

/// A named, read-only view of a tensor's bytes, for writers.
struct TensorRef {
  std::string name;
  DType dtype = ACCRUE_DTYPE_FLOAT32;
  std::vector<int64_t> shape;
  const void *data = nullptr;
  size_t bytes = 0;

  static TensorRef of(const std::string &name, const Array &array) {
    return {name, array.dtype, array.shape, array.data.data(),
            array.data.size()};
  }
};

/// Reads every array of a .npz file (stored or deflated members).
std::map<std::string, Array> readNpz(const std::string &path);
/// The same from the file's bytes; `path` names the file in errors.
std::map<std::string, Array> parseNpz(const std::string &bytes,
                                      const std::string &path);
/// Writes arrays as an uncompressed .npz, atomically.
void writeNpz(const std::string &path,
              const std::map<std::string, Array> &arrays);

/// Reads a safetensors file (and its string metadata, if asked).
std::map<std::string, Array>
readSafetensors(const std::string &path,
                std::map<std::string, std::string> *metadata = nullptr);
/// The same from the file's bytes; `path` names the file in errors.
std::map<std::string, Array>
parseSafetensors(const std::string &bytes, const std::string &path,
                 std::map<std::string, std::string> *metadata = nullptr);
/// A file read at offsets: its size is known once it is open ("cannot
/// read" names it otherwise).
class InputFile {
public:
  explicit InputFile(const std::string &path);
  uint64_t size() const { return length; }
  /// Reads [offset, offset + len) into `dst`; false on an I/O error.
  bool read(uint64_t offset, size_t len, void *dst);
  const std::string path;

private:
  std::ifstream in;
  uint64_t length = 0;
};

/// One tensor of a safetensors file: its bytes are [begin, end) after the
/// header.
struct SafetensorsEntry {
  std::string name;
  DType dtype = ACCRUE_DTYPE_FLOAT32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

/// A safetensors file read one tensor at a time, straight into where it
/// goes (the initial parameters: no file-sized copy beside the arenas).
/// The header is read and checked on construction.
class SafetensorsFile {
public:
  explicit SafetensorsFile(const std::string &path);
  /// The tensor named `name`, or null.
  const SafetensorsEntry *find(const std::string &name) const;
  /// Reads `entry`'s bytes into `dst` (end - begin bytes).
  void read(const SafetensorsEntry &entry, void *dst);
  const std::string path;

private:
  InputFile file;
  uint64_t base = 0;
  std::vector<SafetensorsEntry> entries;
};

/// Writes a safetensors file atomically (temp file, fsync, rename),
/// streaming the tensors from where they are.
void writeSafetensors(const std::string &path,
                      const std::vector<TensorRef> &tensors,
                      const std::map<std::string, std::string> &metadata = {});
/// The same for callers built without exceptions (the compiler): returns
/// false and sets `error` instead of throwing.
bool writeSafetensors(const std::string &path,
                      const std::vector<TensorRef> &tensors,
                      const std::map<std::string, std::string> &metadata,
                      std::string &error) noexcept;

/// Writes `bytes` to `path` atomically: a temporary file in the same
/// directory, fsync, rename.
void writeFileAtomically(const std::string &path, const std::string &bytes);
std::string readFile(const std::string &path);

/// Overwrites the raw_data of the named float initializers of a serialized
/// ONNX model (as accrue-compile stores it) with new values.
std::string patchOnnxInitializers(
    const std::string &model,
    const std::map<std::string, std::pair<const float *, int64_t>> &values);

/// The little-endian 1- or 2-byte integer at `bytes`, sign- or
/// zero-extended to int32 (narrow integers widen to int32 in the compiler
/// and the data reader alike).
inline int32_t widenToInt32(const unsigned char *bytes, int width,
                            bool isSigned) {
  uint32_t raw = bytes[0];
  if (width == 2)
    raw |= static_cast<uint32_t>(bytes[1]) << 8;
  int32_t value = static_cast<int32_t>(raw);
  if (isSigned && (raw >> (8 * width - 1)) & 1)
    value -= 1 << (8 * width);
  return value;
}

} // namespace accrue::rt

#endif // ACCRUE_RUNTIME_ARRAYS_H
