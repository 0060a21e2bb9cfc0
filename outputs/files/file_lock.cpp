#include "outputs/files/file_lock.h"

#include <sys/file.h>
#include <unistd.h>

namespace gcrun::files {

UniqueFd tryLockFile(const Directory& dir, const std::string& name, std::string& holder) {
  auto lock = dir.openLockFile(name);
  if (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {0};
    const ssize_t n = ::pread(lock.get(), pid, sizeof(pid) - 1, 0);
    holder = n > 0 ? std::string(pid, static_cast<size_t>(n)) : "";
    return UniqueFd();
  }
  const std::string me = std::to_string(::getpid());
  if (::ftruncate(lock.get(), 0) != 0 || ::pwrite(lock.get(), me.data(), me.size(), 0) < 0) {
    // The pid only helps the message of a second process; the lock holds without it.
  }
  return lock;
}

}  // namespace gcrun::files
