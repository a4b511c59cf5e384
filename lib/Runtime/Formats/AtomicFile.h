//===- AtomicFile.h - files that appear whole or not at all -----*- C++ -*-===//
//
// Shared by the runtime's writers (Arrays.cpp, ArrayFormats.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_LIB_RUNTIME_FORMATS_ATOMICFILE_H
#define ACCRUE_LIB_RUNTIME_FORMATS_ATOMICFILE_H

#include "accrue-runtime/Error.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace accrue::rt {

/// A file written under a temporary name in its directory and renamed into
/// place once complete and on disk, so that readers never see a partial
/// file; one left unfinished is removed.
class AtomicFile {
public:
  explicit AtomicFile(const std::string &path)
      : path(path), tmp(path + ".tmp-XXXXXX") {
    fd = ::mkstemp(tmp.data());
    if (fd < 0)
      fail(errno);
  }
  ~AtomicFile() {
    if (fd >= 0) {
      ::close(fd);
      ::unlink(tmp.c_str());
    }
  }

  void write(const void *data, size_t size) {
    const char *bytes = static_cast<const char *>(data);
    while (size) {
      ssize_t n = ::write(fd, bytes, std::min<size_t>(size, 1 << 30));
      if (n < 0) {
        if (errno == EINTR)
          continue;
        fail(errno);
      }
      bytes += n;
      size -= n;
    }
  }

  /// fsync, rename, and make the rename durable.
  void commit() {
    if (::fsync(fd) != 0 || ::fchmod(fd, 0644) != 0)
      fail(errno);
    int closed = ::close(fd);
    fd = -1;
    if (closed != 0 || std::rename(tmp.c_str(), path.c_str()) != 0) {
      int err = errno;
      ::unlink(tmp.c_str());
      fail(err);
    }
    size_t slash = path.find_last_of('/');
    std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
    int dirfd = ::open(dir.empty() ? "/" : dir.c_str(), O_RDONLY);
    if (dirfd >= 0) {
      ::fsync(dirfd);
      ::close(dirfd);
    }
  }

private:
  [[noreturn]] void fail(int err) {
    throw Error("cannot write '" + path + "': " + std::strerror(err));
  }

  std::string path, tmp;
  int fd = -1;
};

} // namespace accrue::rt

#endif // ACCRUE_LIB_RUNTIME_FORMATS_ATOMICFILE_H
