//===- Arrays.cpp - host arrays and files ---------------------*- C++ -*-===//
//
// The .npz and safetensors formats are in ArrayFormats.cpp.
//
//===----------------------------------------------------------------------===//

#include "accrue-runtime/Arrays.h"

#include "Formats/AtomicFile.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

using namespace accrue::rt;

//===----------------------------------------------------------------------===//
// DType and Array
//===----------------------------------------------------------------------===//

DType accrue::rt::parseDType(const std::string &name) {
  if (name == "f32")
    return DType::F32;
  if (name == "f64")
    return DType::F64;
  if (name == "f16")
    return DType::F16;
  if (name == "i64")
    return DType::I64;
  if (name == "i32")
    return DType::I32;
  if (name == "bool")
    return DType::Bool;
  if (name == "u8")
    return DType::U8;
  throw Error("unknown dtype '" + name + "'");
}

const char *accrue::rt::dtypeName(DType type) {
  switch (type) {
  case DType::F32:
    return "f32";
  case DType::F64:
    return "f64";
  case DType::F16:
    return "f16";
  case DType::I64:
    return "i64";
  case DType::I32:
    return "i32";
  case DType::Bool:
    return "bool";
  case DType::U8:
    return "u8";
  }
  return "?";
}

size_t accrue::rt::dtypeSize(DType type) {
  switch (type) {
  case DType::F64:
  case DType::I64:
    return 8;
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
    return 2;
  case DType::Bool:
  case DType::U8:
    return 1;
  }
  return 1;
}

int64_t Array::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

static float halfToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { // subnormal: renormalize
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// Element `i` of `a` as a double.
static double elementAsDouble(const Array &a, int64_t i) {
  switch (a.dtype) {
  case DType::F32:
    return a.as<float>()[i];
  case DType::F64:
    return a.as<double>()[i];
  case DType::F16:
    return halfToFloat(a.as<uint16_t>()[i]);
  case DType::I64:
    return static_cast<double>(a.as<int64_t>()[i]);
  case DType::I32:
    return a.as<int32_t>()[i];
  case DType::Bool:
    return a.as<uint8_t>()[i] ? 1.0 : 0.0;
  case DType::U8:
    return a.as<uint8_t>()[i];
  }
  return 0;
}

static bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::F16;
}

Array Array::convertTo(DType type, const std::string &what) const {
  if (type == dtype)
    return *this;
  if (!isFloat(type) && isFloat(dtype))
    throw Error(what + " has dtype " + dtypeName(dtype) + ", expected " +
                dtypeName(type) + " (integer labels cannot come from floats)");
  Array out;
  out.dtype = type;
  out.shape = shape;
  int64_t n = numElements();
  out.data.resize(n * dtypeSize(type));
  for (int64_t i = 0; i < n; ++i) {
    double v = elementAsDouble(*this, i);
    switch (type) {
    case DType::F32:
      out.as<float>()[i] = static_cast<float>(v);
      break;
    case DType::F64:
      out.as<double>()[i] = v;
      break;
    case DType::I64:
      out.as<int64_t>()[i] = static_cast<int64_t>(v);
      break;
    case DType::I32:
      out.as<int32_t>()[i] = static_cast<int32_t>(v);
      break;
    case DType::Bool:
      out.as<uint8_t>()[i] = v != 0;
      break;
    case DType::U8:
      out.as<uint8_t>()[i] = static_cast<uint8_t>(v);
      break;
    case DType::F16:
      throw Error(what + ": conversion to f16 is not supported");
    }
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//

InputFile::InputFile(const std::string &path)
    : path(path), in(path, std::ios::binary | std::ios::ate) {
  if (!in)
    throw Error("cannot read '" + path + "': " + std::strerror(errno));
  std::streamoff end = in.tellg();
  length = end > 0 ? static_cast<uint64_t>(end) : 0;
}

bool InputFile::read(uint64_t offset, size_t len, void *dst) {
  in.seekg(static_cast<std::streamoff>(offset));
  return static_cast<bool>(
      in.read(static_cast<char *>(dst), static_cast<std::streamsize>(len)));
}

std::string accrue::rt::readFile(const std::string &path) {
  InputFile file(path);
  // One buffer of the file's size (a stringstream would hold a second
  // copy while returning the first).
  std::string bytes(file.size(), '\0');
  if (file.size() && !file.read(0, file.size(), bytes.data()))
    throw Error("cannot read '" + path + "': " + std::strerror(errno));
  return bytes;
}

void accrue::rt::writeFileAtomically(const std::string &path,
                                     const std::string &bytes) {
  AtomicFile file(path);
  file.write(bytes.data(), bytes.size());
  file.commit();
}
