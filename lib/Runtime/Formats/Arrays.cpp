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
  DType type;
  if (accrueParseDType(name.c_str(), &type) != 0)
    throw Error("unknown dtype '" + name + "'");
  return type;
}

const char *accrue::rt::dtypeName(DType type) { return accrueDTypeName(type); }

size_t accrue::rt::dtypeSize(DType type) {
  switch (type) {
  case ACCRUE_DTYPE_FLOAT64:
  case ACCRUE_DTYPE_INT64:
    return 8;
  case ACCRUE_DTYPE_FLOAT32:
  case ACCRUE_DTYPE_INT32:
    return 4;
  case ACCRUE_DTYPE_FLOAT16:
  case ACCRUE_DTYPE_BFLOAT16:
    return 2;
  case ACCRUE_DTYPE_BOOL:
  case ACCRUE_DTYPE_UINT8:
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
  case ACCRUE_DTYPE_FLOAT32:
    return a.as<float>()[i];
  case ACCRUE_DTYPE_FLOAT64:
    return a.as<double>()[i];
  case ACCRUE_DTYPE_FLOAT16:
    return halfToFloat(a.as<uint16_t>()[i]);
  case ACCRUE_DTYPE_BFLOAT16: {
    uint32_t bits = uint32_t(a.as<uint16_t>()[i]) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  case ACCRUE_DTYPE_INT64:
    return static_cast<double>(a.as<int64_t>()[i]);
  case ACCRUE_DTYPE_INT32:
    return a.as<int32_t>()[i];
  case ACCRUE_DTYPE_BOOL:
    return a.as<uint8_t>()[i] ? 1.0 : 0.0;
  case ACCRUE_DTYPE_UINT8:
    return a.as<uint8_t>()[i];
  }
  return 0;
}

static bool isFloat(DType t) {
  return t == ACCRUE_DTYPE_FLOAT32 || t == ACCRUE_DTYPE_FLOAT64 ||
         t == ACCRUE_DTYPE_FLOAT16 || t == ACCRUE_DTYPE_BFLOAT16;
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
    case ACCRUE_DTYPE_FLOAT32:
      out.as<float>()[i] = static_cast<float>(v);
      break;
    case ACCRUE_DTYPE_FLOAT64:
      out.as<double>()[i] = v;
      break;
    case ACCRUE_DTYPE_INT64:
      out.as<int64_t>()[i] = static_cast<int64_t>(v);
      break;
    case ACCRUE_DTYPE_INT32:
      out.as<int32_t>()[i] = static_cast<int32_t>(v);
      break;
    case ACCRUE_DTYPE_BOOL:
      out.as<uint8_t>()[i] = v != 0;
      break;
    case ACCRUE_DTYPE_UINT8:
      out.as<uint8_t>()[i] = static_cast<uint8_t>(v);
      break;
    case ACCRUE_DTYPE_FLOAT16:
    case ACCRUE_DTYPE_BFLOAT16:
      throw Error(what + ": conversion to " + dtypeName(type) +
                  " is not supported");
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
