//===- FolderLock.h - one writer per checkpoint folder ----------*- C++ -*-===//
//
// A run that writes checkpoints holds an advisory lock on its folder for its
// whole life, so a second run started into the same folder is refused
// instead of overwriting (or, at start, cleaning up) the first one's files.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_LIB_RUNTIME_RUN_FOLDERLOCK_H
#define ACCRUE_LIB_RUNTIME_RUN_FOLDERLOCK_H

#include <optional>
#include <string>

namespace accrue::rt {

/// The lock of a folder: a kernel record lock on its file `accrue.lock`,
/// which also says who holds it (process id, host, start time). The kernel
/// drops the lock when its holder dies, so the lock of a dead run is taken
/// over without a stale-lock heuristic; on NFS the server's lock manager
/// keeps it, so ranks of runs on other hosts see it too. Open file
/// description locks: a second session of the same process conflicts as
/// another process would, and closing some other descriptor of the file does
/// not release it.
class FolderLock {
public:
  /// The lock file's name inside the folder.
  static constexpr const char *kFileName = "accrue.lock";

  /// Takes the lock of `folder`. Throws Error naming the folder, `setting`
  /// and the holder when another run holds it, or when the lock file
  /// cannot be created. A filesystem without locks (ENOLCK, EOPNOTSUPP) is
  /// not an error: the lock is then not held and `unsupported()` says why.
  FolderLock(const std::string &folder, const std::string &setting);
  ~FolderLock();
  FolderLock(const FolderLock &) = delete;
  FolderLock &operator=(const FolderLock &) = delete;

  /// Why the folder could not be locked, if its filesystem has no locks.
  const std::optional<std::string> &unsupported() const { return why; }

private:
  std::string path;
  int fd = -1;
  std::optional<std::string> why;
};

} // namespace accrue::rt

#endif // ACCRUE_LIB_RUNTIME_RUN_FOLDERLOCK_H
