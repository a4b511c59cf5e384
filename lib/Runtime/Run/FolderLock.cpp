//===- FolderLock.cpp - one writer per checkpoint folder --------*- C++ -*-===//

#include "Run/FolderLock.h"

#include "accrue-runtime/Error.h"

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <unistd.h>

using namespace accrue::rt;

namespace {

/// A write lock on the whole file, held by the open file description.
struct flock wholeFile() {
  struct flock lock;
  std::memset(&lock, 0, sizeof lock);
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  return lock;
}

/// What the lock file says of its holder ("process 123 on host h since
/// ..."), or a placeholder if it says nothing readable.
std::string holderOf(int fd) {
  char text[256];
  ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  std::string holder(text, n > 0 ? static_cast<size_t>(n) : 0);
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0'))
    holder.pop_back();
  if (holder.empty() || holder.find('\n') != std::string::npos)
    return "another process";
  return holder;
}

std::string describeSelf() {
  char host[256] = "unknown host";
  if (::gethostname(host, sizeof host - 1) != 0)
    std::strcpy(host, "unknown host");
  host[sizeof host - 1] = '\0';
  char since[32] = "";
  std::time_t now = std::time(nullptr);
  std::tm utc;
  if (::gmtime_r(&now, &utc))
    std::strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return "process " + std::to_string(::getpid()) + " on host " + host +
         " since " + since + "\n";
}

} // namespace

FolderLock::FolderLock(const std::string &folder, const std::string &setting)
    : path(folder + "/" + kFileName) {
  fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    throw Error("cannot lock " + setting + " '" + folder + "': cannot open '" +
                path + "': " + std::strerror(errno));
  struct flock lock = wholeFile();
  if (::fcntl(fd, F_OFD_SETLK, &lock) != 0) {
    int err = errno;
    if (err == EAGAIN || err == EACCES) {
      std::string holder = holderOf(fd);
      ::close(fd);
      fd = -1;
      throw Error(setting + " '" + folder + "' is in use by another run (" +
                  holder + ", its lock '" + path +
                  "'): two runs in one folder overwrite each other's "
                  "checkpoints; use another folder, or wait for that run "
                  "to end");
    }
    ::close(fd);
    fd = -1;
    if (err == ENOLCK || err == EOPNOTSUPP || err == EINVAL) {
      why = "the filesystem of " + setting + " '" + folder +
            "' does not lock files (" + std::strerror(err) +
            "): another run writing into it would not be noticed";
      return;
    }
    throw Error("cannot lock " + setting + " '" + folder + "' ('" + path +
                "'): " + std::strerror(err));
  }
  // Ours: say who holds it, replacing a dead holder's text (the text only
  // serves messages; the lock is what counts).
  std::string self = describeSelf();
  if (::ftruncate(fd, 0) == 0)
    (void)!::pwrite(fd, self.data(), self.size(), 0);
}

FolderLock::~FolderLock() {
  // Closing the only descriptor of the open file description releases the
  // lock; the file stays (removing it would race with a run taking it).
  if (fd >= 0)
    ::close(fd);
}
