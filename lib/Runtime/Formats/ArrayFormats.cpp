//===- ArrayFormats.cpp - .npy/.npz and safetensors files -------*- C++ -*-===//
//
// Array files from outside (datasets, initial parameters, checkpoints):
// every size and offset is checked before it is used (the readers are
// fuzzed, tools/fuzz), and data is read straight into the arrays.
//
//===----------------------------------------------------------------------===//

#include "accrue-runtime/Arrays.h"

#include "Formats/AtomicFile.h"

#include <nlohmann/json.hpp>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <sstream>

using namespace accrue::rt;

namespace {

/// The most elements an array read from a file may have (as the importer's
/// limit for tensors): far beyond any real array, and small enough that
/// element and byte counts cannot overflow.
constexpr int64_t kMaxElements = int64_t(1) << 40;

/// Checks a shape read from a file: dimensions >= 0 and at most
/// kMaxElements elements in all, so numElements() is exact.
void checkShape(const std::vector<int64_t> &shape, const std::string &what) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      throw Error(what + " has a negative dimension");
    if (d > kMaxElements || (d && n > kMaxElements / d))
      throw Error(what + " has more than 2^40 elements");
    n *= d;
  }
}

/// One dimension of a .npy header's shape: decimal digits, blanks around.
int64_t parseDimension(const std::string &text, const std::string &what) {
  size_t begin = text.find_first_not_of(' ');
  size_t end = text.find_last_not_of(' ');
  if (begin == std::string::npos || end - begin + 1 > 15)
    throw Error(what + ": malformed .npy header (shape)");
  int64_t value = 0;
  for (size_t i = begin; i <= end; ++i) {
    if (text[i] < '0' || text[i] > '9')
      throw Error(what + ": malformed .npy header (shape)");
    value = value * 10 + (text[i] - '0');
  }
  return value;
}

} // namespace

//===----------------------------------------------------------------------===//
// npy / npz
//===----------------------------------------------------------------------===//

namespace {

uint16_t le16(const uint8_t *p) { return p[0] | (p[1] << 8); }
uint32_t le32(const uint8_t *p) {
  return p[0] | (p[1] << 8) | (p[2] << 16) | (uint32_t(p[3]) << 24);
}
uint64_t le64(const uint8_t *p) {
  return le32(p) | (uint64_t(le32(p + 4)) << 32);
}

/// Where a .npz is parsed from: its bytes in memory, or the file itself,
/// read where needed (the arrays' data straight into the arrays).
class ByteSource {
public:
  virtual ~ByteSource() = default;
  virtual uint64_t size() const = 0;
  /// Copies [offset, offset + len) (inside size()) into `dst`.
  virtual void read(uint64_t offset, size_t len, void *dst) = 0;
  /// The bytes [offset, offset + len), valid until the next call.
  const uint8_t *view(uint64_t offset, size_t len) {
    scratch.resize(len);
    read(offset, len, scratch.data());
    return scratch.data();
  }

private:
  std::vector<uint8_t> scratch;
};

class MemorySource : public ByteSource {
public:
  explicit MemorySource(const std::string &bytes) : bytes(bytes) {}
  uint64_t size() const override { return bytes.size(); }
  void read(uint64_t offset, size_t len, void *dst) override {
    std::memcpy(dst, bytes.data() + offset, len);
  }

private:
  const std::string &bytes;
};

class FileSource : public ByteSource {
public:
  explicit FileSource(const std::string &path) : file(path) {}
  uint64_t size() const override { return file.size(); }
  void read(uint64_t offset, size_t len, void *dst) override {
    if (!file.read(offset, len, dst))
      throw Error("cannot read '" + file.path + "'");
  }

private:
  InputFile file;
};

/// The .npy member of `size` bytes at `offset` of `source`: its header
/// read and checked, its data read straight into the array.
Array parseNpy(ByteSource &source, uint64_t offset, uint64_t size,
               const std::string &what) {
  if (size < 10)
    throw Error(what + " is not a .npy array");
  const uint8_t *p = source.view(offset, std::min<uint64_t>(size, 12));
  if (std::memcmp(p, "\x93NUMPY", 6) != 0)
    throw Error(what + " is not a .npy array");
  size_t headerLen, start;
  if (p[6] == 1) {
    headerLen = le16(p + 8);
    start = 10;
  } else {
    if (size < 12)
      throw Error(what + " is truncated");
    headerLen = le32(p + 8);
    start = 12;
  }
  if (start + headerLen > size)
    throw Error(what + " is truncated");
  const uint8_t *h = source.view(offset + start, headerLen);
  std::string header(reinterpret_cast<const char *>(h), headerLen);
  auto field = [&](const std::string &key) {
    size_t at = header.find("'" + key + "'");
    if (at == std::string::npos)
      throw Error(what + ": malformed .npy header");
    return header.substr(header.find(':', at) + 1);
  };
  std::string descr = field("descr");
  descr = descr.substr(descr.find('\'') + 1);
  descr = descr.substr(0, descr.find('\''));
  if (header.find("'fortran_order': True") != std::string::npos)
    throw Error(what + " is in Fortran order; save it C-contiguous");
  std::string shapeText = field("shape");
  shapeText = shapeText.substr(shapeText.find('(') + 1);
  shapeText = shapeText.substr(0, shapeText.find(')'));

  Array a;
  std::stringstream ss(shapeText);
  std::string item;
  while (std::getline(ss, item, ','))
    if (item.find_first_not_of(" ") != std::string::npos)
      a.shape.push_back(parseDimension(item, what));
  checkShape(a.shape, what);
  static const std::map<std::string, DType> types = {
      {"<f4", ACCRUE_DTYPE_FLOAT32}, {"<f8", ACCRUE_DTYPE_FLOAT64},
      {"<f2", ACCRUE_DTYPE_FLOAT16}, {"<i8", ACCRUE_DTYPE_INT64},
      {"<i4", ACCRUE_DTYPE_INT32},   {"|b1", ACCRUE_DTYPE_BOOL},
      {"|u1", ACCRUE_DTYPE_UINT8}};
  // 8- and 16-bit integers other than uint8 widen to int32 as they load.
  static const std::map<std::string, std::pair<int, bool>> narrow = {
      {"|i1", {1, true}}, {"<i2", {2, true}}, {"<u2", {2, false}}};
  auto it = types.find(descr);
  auto narrowIt = narrow.find(descr);
  if (it == types.end() && narrowIt == narrow.end())
    throw Error(what + " has unsupported dtype '" + descr +
                "' (use float32, float64, float16, int64, int32, int16, "
                "uint16, int8, uint8 or bool)");
  a.dtype = it != types.end() ? it->second : ACCRUE_DTYPE_INT32;
  uint64_t data = offset + start + headerLen,
           available = size - start - headerLen;
  if (narrowIt != narrow.end()) {
    auto [width, isSigned] = narrowIt->second;
    int64_t count = a.numElements();
    if (static_cast<uint64_t>(count) * width > available)
      throw Error(what + " is truncated: its data is shorter than its shape");
    const unsigned char *src = source.view(data, count * width);
    a.data.resize(count * 4);
    for (int64_t i = 0; i < count; ++i)
      a.as<int32_t>()[i] = widenToInt32(src + i * width, width, isSigned);
    return a;
  }
  uint64_t bytes = a.numElements() * dtypeSize(a.dtype);
  if (bytes > available)
    throw Error(what + " is truncated: its data is shorter than its shape");
  a.data.resize(bytes);
  source.read(data, bytes, a.data.data());
  return a;
}

std::string inflateRaw(const uint8_t *data, size_t size, size_t expected,
                       const std::string &what) {
  std::string out(expected, '\0');
  z_stream zs{};
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK)
    throw Error("zlib initialization failed");
  zs.next_in = const_cast<uint8_t *>(data);
  zs.avail_in = size;
  zs.next_out = reinterpret_cast<uint8_t *>(out.data());
  zs.avail_out = expected;
  int rc = inflate(&zs, Z_FINISH);
  inflateEnd(&zs);
  if (rc != Z_STREAM_END || zs.total_out != expected)
    throw Error(what + " is corrupt (deflate stream)");
  return out;
}

std::string npyBytes(const Array &a) {
  static const std::map<DType, std::string> descr = {
      {ACCRUE_DTYPE_FLOAT32, "<f4"}, {ACCRUE_DTYPE_FLOAT64, "<f8"},
      {ACCRUE_DTYPE_FLOAT16, "<f2"}, {ACCRUE_DTYPE_INT64, "<i8"},
      {ACCRUE_DTYPE_INT32, "<i4"},   {ACCRUE_DTYPE_BOOL, "|b1"}};
  std::string shape;
  for (int64_t d : a.shape)
    shape += std::to_string(d) + ", ";
  if (a.shape.size() > 1)
    shape.resize(shape.size() - 1);
  std::string header = "{'descr': '" + descr.at(a.dtype) +
                       "', 'fortran_order': False, 'shape': (" + shape + "), }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += char(header.size() & 0xff);
  out += char(header.size() >> 8);
  out += header;
  out.append(reinterpret_cast<const char *>(a.data.data()), a.data.size());
  return out;
}

} // namespace

namespace {

/// A .npz (zip) archive of .npy members from `source`: the directory is
/// read whole, each stored member's data straight into its array.
std::map<std::string, Array> parseNpz(ByteSource &source,
                                      const std::string &path) {
  uint64_t size = source.size();
  // End of central directory, within the last 64 KiB + 22 bytes (`end`
  // holds them, from offset `tail` on).
  uint64_t tail = size > 65557 ? size - 65557 : 0;
  size_t eocd = std::string::npos;
  std::vector<uint8_t> end(size - tail);
  source.read(tail, end.size(), end.data());
  if (size >= 22) {
    for (size_t i = size - tail - 22 + 1; i-- > 0;)
      if (le32(end.data() + i) == 0x06054b50) {
        eocd = i;
        break;
      }
  }
  if (eocd == std::string::npos)
    throw Error("'" + path + "' is not a .npz (zip) file or is truncated");
  uint64_t count = le16(end.data() + eocd + 10);
  uint64_t dirOffset = le32(end.data() + eocd + 16);
  eocd += tail;
  if (dirOffset == 0xffffffffu && eocd >= 20 &&
      le32(source.view(eocd - 20, 4)) == 0x07064b50) {
    uint64_t z64 = le64(source.view(eocd - 20 + 8, 8));
    if (size < 56 || z64 > size - 56 || le32(source.view(z64, 4)) != 0x06064b50)
      throw Error("'" + path + "': corrupt zip64 directory");
    const uint8_t *record = source.view(z64, 56);
    count = le64(record + 32);
    dirOffset = le64(record + 48);
  }
  // The directory, from its offset to the end of the file (its entries
  // are checked against that). A valid archive's directory is at its end;
  // a crafted offset costs at most the file's size here.
  if (dirOffset > size)
    throw Error("'" + path + "': corrupt zip directory");
  std::vector<uint8_t> directory(size - dirOffset);
  source.read(dirOffset, directory.size(), directory.data());
  // The directory's bytes by their offset in the file.
  auto p = [&](uint64_t offset) {
    return directory.data() + (offset - dirOffset);
  };
  std::map<std::string, Array> arrays;
  size_t at = dirOffset;
  // (Offsets and sizes come from the file: every check below is written so
  // that it cannot overflow.)
  for (uint64_t e = 0; e < count; ++e) {
    if (at > size || size - at < 46 || le32(p(at)) != 0x02014b50)
      throw Error("'" + path + "': corrupt zip directory");
    uint16_t method = le16(p(at + 10));
    uint64_t csize = le32(p(at + 20)), usize = le32(p(at + 24));
    uint16_t nameLen = le16(p(at + 28)), extraLen = le16(p(at + 30)),
             commentLen = le16(p(at + 32));
    uint64_t local = le32(p(at + 42));
    if (size - at - 46 < size_t(nameLen) + extraLen)
      throw Error("'" + path + "': corrupt zip directory");
    std::string name(reinterpret_cast<const char *>(p(at + 46)), nameLen);
    // zip64 extra field: 64-bit sizes/offset replace the saturated ones.
    size_t extraEnd = at + 46 + nameLen + extraLen;
    for (size_t x = at + 46 + nameLen; x + 4 <= extraEnd;) {
      uint16_t id = le16(p(x)), len = le16(p(x + 2));
      size_t fieldEnd = std::min(extraEnd, x + 4 + len);
      if (id == 0x0001) {
        size_t f = x + 4;
        auto next = [&](uint64_t &value) {
          if (f + 8 > fieldEnd)
            throw Error("'" + path + "': corrupt zip64 field of '" + name +
                        "'");
          value = le64(p(f));
          f += 8;
        };
        if (usize == 0xffffffffu)
          next(usize);
        if (csize == 0xffffffffu)
          next(csize);
        if (local == 0xffffffffu)
          next(local);
      }
      x += 4 + len;
    }
    at += 46 + nameLen + extraLen + commentLen;
    if (size < 30 || local > size - 30)
      throw Error("'" + path + "': corrupt zip entry '" + name + "'");
    const uint8_t *header = source.view(local, 30);
    if (le32(header) != 0x04034b50)
      throw Error("'" + path + "': corrupt zip entry '" + name + "'");
    size_t dataStart = local + 30 + le16(header + 26) + le16(header + 28);
    if (dataStart > size || csize > size - dataStart)
      throw Error("'" + path + "' is truncated (entry '" + name + "')");
    // Deflate expands at most 1032:1: a larger size is a lie, not data to
    // allocate for (a zip bomb's header).
    if (method == 8 && usize / 1032 > csize + 1)
      throw Error("'" + path + "' entry '" + name +
                  "' claims to inflate to more than its data can hold");
    std::string what = "'" + path + "' entry '" + name + "'";
    std::string key = name;
    if (key.size() > 4 && key.compare(key.size() - 4, 4, ".npy") == 0)
      key.resize(key.size() - 4);
    if (method == 0) {
      arrays[key] = parseNpy(source, dataStart, csize, what);
    } else if (method == 8) {
      std::string member =
          inflateRaw(source.view(dataStart, csize), csize, usize, what);
      MemorySource inflated(member);
      arrays[key] = parseNpy(inflated, 0, member.size(), what);
    } else {
      throw Error(what + " uses an unsupported compression method");
    }
  }
  return arrays;
}

} // namespace

std::map<std::string, Array> accrue::rt::readNpz(const std::string &path) {
  FileSource file(path);
  return parseNpz(file, path);
}

std::map<std::string, Array> accrue::rt::parseNpz(const std::string &bytes,
                                                  const std::string &path) {
  MemorySource memory(bytes);
  return parseNpz(memory, path);
}

void accrue::rt::writeNpz(const std::string &path,
                          const std::map<std::string, Array> &arrays) {
  std::string out, directory;
  auto put16 = [](std::string &s, uint16_t v) {
    s += char(v & 0xff);
    s += char(v >> 8);
  };
  auto put32 = [&](std::string &s, uint32_t v) {
    put16(s, v & 0xffff);
    put16(s, v >> 16);
  };
  uint16_t count = 0;
  for (const auto &[name, array] : arrays) {
    std::string data = npyBytes(array);
    std::string file = name + ".npy";
    if (data.size() >= 0xffffffffu || out.size() >= 0xffffffffu)
      throw Error("writeNpz: arrays over 4 GiB are not supported");
    uint32_t crc =
        crc32(0, reinterpret_cast<const Bytef *>(data.data()), data.size());
    uint32_t offset = out.size();
    put32(out, 0x04034b50);
    put16(out, 20);
    put16(out, 0);
    put16(out, 0); // stored
    put32(out, 0); // time, date
    put32(out, crc);
    put32(out, data.size());
    put32(out, data.size());
    put16(out, file.size());
    put16(out, 0);
    out += file;
    out += data;
    put32(directory, 0x02014b50);
    put16(directory, 20);
    put16(directory, 20);
    put16(directory, 0);
    put16(directory, 0);
    put32(directory, 0);
    put32(directory, crc);
    put32(directory, data.size());
    put32(directory, data.size());
    put16(directory, file.size());
    put16(directory, 0);
    put16(directory, 0);
    put16(directory, 0);
    put16(directory, 0);
    put32(directory, 0);
    put32(directory, offset);
    directory += file;
    ++count;
  }
  uint32_t dirOffset = out.size();
  out += directory;
  put32(out, 0x06054b50);
  put16(out, 0);
  put16(out, 0);
  put16(out, count);
  put16(out, count);
  put32(out, directory.size());
  put32(out, dirOffset);
  put16(out, 0);
  writeFileAtomically(path, out);
}

//===----------------------------------------------------------------------===//
// safetensors
//===----------------------------------------------------------------------===//

static const char *safetensorsDType(DType t) {
  switch (t) {
  case ACCRUE_DTYPE_FLOAT32:
    return "F32";
  case ACCRUE_DTYPE_FLOAT64:
    return "F64";
  case ACCRUE_DTYPE_FLOAT16:
    return "F16";
  case ACCRUE_DTYPE_INT64:
    return "I64";
  case ACCRUE_DTYPE_INT32:
    return "I32";
  case ACCRUE_DTYPE_BOOL:
    return "BOOL";
  case ACCRUE_DTYPE_UINT8:
    return "U8";
  case ACCRUE_DTYPE_BFLOAT16:
    return "BF16";
  }
  return "?";
}

std::map<std::string, Array>
accrue::rt::readSafetensors(const std::string &path,
                            std::map<std::string, std::string> *metadata) {
  return parseSafetensors(readFile(path), path, metadata);
}

/// The tensors of a safetensors header (`headerLen` bytes at `header`),
/// checked against the `dataBytes` that follow it.
static std::vector<SafetensorsEntry>
parseSafetensorsHeader(const char *header, uint64_t headerLen,
                       uint64_t dataBytes, const std::string &path,
                       std::map<std::string, std::string> *metadata) {
  nlohmann::json json =
      nlohmann::json::parse(header, header + headerLen, nullptr, false);
  if (json.is_discarded() || !json.is_object())
    throw Error("'" + path + "' has a corrupt safetensors header");
  static const std::map<std::string, DType> types = {
      {"F32", ACCRUE_DTYPE_FLOAT32},  {"F64", ACCRUE_DTYPE_FLOAT64},
      {"F16", ACCRUE_DTYPE_FLOAT16},  {"I64", ACCRUE_DTYPE_INT64},
      {"I32", ACCRUE_DTYPE_INT32},    {"BOOL", ACCRUE_DTYPE_BOOL},
      {"BF16", ACCRUE_DTYPE_BFLOAT16}};
  std::vector<SafetensorsEntry> entries;
  for (auto &[name, info] : json.items()) {
    if (name == "__metadata__") {
      if (!metadata)
        continue;
      if (!info.is_object())
        throw Error("'" + path + "' has corrupt metadata");
      for (auto &[key, value] : info.items()) {
        if (!value.is_string())
          throw Error("'" + path + "' has corrupt metadata");
        (*metadata)[key] = value.get<std::string>();
      }
      continue;
    }
    try {
      SafetensorsEntry e;
      e.name = name;
      auto it = types.find(info.at("dtype").get<std::string>());
      if (it == types.end())
        throw Error("'" + path + "': tensor '" + name +
                    "' has an unsupported dtype");
      e.dtype = it->second;
      e.shape = info.at("shape").get<std::vector<int64_t>>();
      checkShape(e.shape, "'" + path + "': tensor '" + name + "'");
      Array sized;
      sized.dtype = e.dtype;
      sized.shape = e.shape;
      auto offsets = info.at("data_offsets").get<std::vector<uint64_t>>();
      if (offsets.size() != 2 || offsets[1] < offsets[0] ||
          offsets[1] > dataBytes ||
          offsets[1] - offsets[0] !=
              sized.numElements() * dtypeSize(sized.dtype))
        throw Error("'" + path + "': tensor '" + name +
                    "' has inconsistent data offsets (truncated file?)");
      e.begin = offsets[0];
      e.end = offsets[1];
      entries.push_back(std::move(e));
    } catch (const nlohmann::json::exception &) {
      throw Error("'" + path + "': malformed entry for '" + name + "'");
    }
  }
  return entries;
}

std::map<std::string, Array>
accrue::rt::parseSafetensors(const std::string &bytes, const std::string &path,
                             std::map<std::string, std::string> *metadata) {
  if (bytes.size() < 8)
    throw Error("'" + path + "' is not a safetensors file (too short)");
  uint64_t headerLen = le64(reinterpret_cast<const uint8_t *>(bytes.data()));
  if (headerLen > bytes.size() - 8)
    throw Error("'" + path + "' is truncated or corrupt (header length)");
  size_t base = 8 + headerLen;
  std::map<std::string, Array> arrays;
  for (SafetensorsEntry &e : parseSafetensorsHeader(
           bytes.data() + 8, headerLen, bytes.size() - base, path, metadata)) {
    Array a;
    a.dtype = e.dtype;
    a.shape = std::move(e.shape);
    a.data.assign(bytes.begin() + base + e.begin, bytes.begin() + base + e.end);
    arrays[e.name] = std::move(a);
  }
  return arrays;
}

SafetensorsFile::SafetensorsFile(const std::string &path)
    : path(path), file(path) {
  uint64_t size = file.size();
  uint8_t length[8];
  if (size < 8 || !file.read(0, 8, length))
    throw Error("'" + path + "' is not a safetensors file (too short)");
  uint64_t headerLen = le64(length);
  if (headerLen > size - 8)
    throw Error("'" + path + "' is truncated or corrupt (header length)");
  std::string header(headerLen, '\0');
  if (!file.read(8, headerLen, header.data()))
    throw Error("cannot read '" + path + "'");
  base = 8 + headerLen;
  entries = parseSafetensorsHeader(header.data(), headerLen, size - base, path,
                                   nullptr);
}

const SafetensorsEntry *SafetensorsFile::find(const std::string &name) const {
  for (const SafetensorsEntry &e : entries)
    if (e.name == name)
      return &e;
  return nullptr;
}

void SafetensorsFile::read(const SafetensorsEntry &entry, void *dst) {
  if (!file.read(base + entry.begin, entry.end - entry.begin, dst))
    throw Error("cannot read tensor '" + entry.name + "' of '" + path + "'");
}

void accrue::rt::writeSafetensors(
    const std::string &path, const std::vector<TensorRef> &tensors,
    const std::map<std::string, std::string> &metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty())
    header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const TensorRef &tensor : tensors) {
    header[tensor.name] = {{"dtype", safetensorsDType(tensor.dtype)},
                           {"shape", tensor.shape},
                           {"data_offsets", {offset, offset + tensor.bytes}}};
    offset += tensor.bytes;
  }
  // Names come from ONNX files: replace invalid UTF-8 rather than throw.
  std::string text =
      header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  // Pad the header with spaces to an 8-byte boundary, as the format allows.
  text.append((8 - text.size() % 8) % 8, ' ');
  uint8_t length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<uint8_t>(uint64_t(text.size()) >> (8 * i));
  AtomicFile file(path);
  file.write(length, 8);
  file.write(text.data(), text.size());
  for (const TensorRef &tensor : tensors)
    file.write(tensor.data, tensor.bytes);
  file.commit();
}

bool accrue::rt::writeSafetensors(
    const std::string &path, const std::vector<TensorRef> &tensors,
    const std::map<std::string, std::string> &metadata,
    std::string &error) noexcept {
  try {
    writeSafetensors(path, tensors, metadata);
    return true;
  } catch (const std::exception &e) {
    error = e.what();
    return false;
  }
}
