#include "outputs/files/safe_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>

#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"

namespace gcrun::files {
namespace {

std::string errorText(int error) { return std::strerror(error); }

// Names are single components: a '/' or '..' would leave the directory.
void checkName(const std::string& name, const std::string& dir) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    throw UserError("'" + clipForMessage(name) + "' is not a plain file name inside " + dir);
  }
}

// The one-line refusal of a path that gcrun would otherwise have written through.
[[noreturn]] void refuse(const std::string& path, int error, const char* what) {
  if (error == ELOOP) {
    throw UserError(path +
                    " is a symlink; gcrun never writes through a symlink in a run, study or report "
                    "directory (remove it)");
  }
  if (error == EISDIR || error == ENOTDIR) {
    throw UserError(path + (error == EISDIR ? " is a directory" : " is not a directory") + "; gcrun cannot " + what +
                    " it (remove or rename it)");
  }
  throw UserError("cannot " + std::string(what) + " " + path + ": " + errorText(error));
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

int UniqueFd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void writeAll(int fd, std::string_view bytes, const std::string& path) {
  const char* data = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t written = ::write(fd, data, left);
    if (written < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("cannot write " + path + ": " + errorText(errno));
    }
    data += written;
    left -= static_cast<size_t>(written);
  }
}

Directory Directory::open(const std::string& path, bool create) {
  if (create) {
    std::error_code error;
    std::filesystem::create_directories(path, error);
    if (error) throw UserError("cannot create directory " + path + ": " + error.message());
  }
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) refuse(path, errno, "open the directory");
  return Directory(std::move(fd), path);
}

std::string Directory::pathOf(const std::string& name) const { return path_ + "/" + name; }

Directory Directory::sub(const std::string& name, bool create) const {
  checkName(name, path_);
  if (create && ::mkdirat(fd(), name.c_str(), 0755) != 0 && errno != EEXIST) {
    refuse(pathOf(name), errno, "create");
  }
  UniqueFd sub(::openat(fd(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!sub) {
    // O_DIRECTORY answers ENOTDIR for a symlink too: tell the two apart for the message.
    struct stat info {};
    const int error = errno;
    const bool link = ::fstatat(fd(), name.c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(info.st_mode);
    refuse(pathOf(name), link ? ELOOP : error, "write");
  }
  return Directory(std::move(sub), pathOf(name));
}

bool Directory::hasDirectory(const std::string& name) const {
  struct stat info {};
  return ::fstatat(fd(), name.c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(info.st_mode);
}

bool Directory::has(const std::string& name) const {
  struct stat info {};
  return ::fstatat(fd(), name.c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0;
}

UniqueFd Directory::openFile(const std::string& name, int flags, const char* what) const {
  checkName(name, path_);
  // O_NONBLOCK: a FIFO planted here must not hang the open; it is refused below.
  UniqueFd file(::openat(fd(), name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644));
  if (!file) refuse(pathOf(name), errno, what);
  struct stat info {};
  if (::fstat(file.get(), &info) != 0 || !S_ISREG(info.st_mode)) {
    throw UserError(pathOf(name) + " is not a regular file; gcrun cannot " + what + " it (remove it)");
  }
  ::fcntl(file.get(), F_SETFL, ::fcntl(file.get(), F_GETFL) & ~O_NONBLOCK);
  return file;
}

UniqueFd Directory::openForAppend(const std::string& name, bool truncate) const {
  auto file = openFile(name, O_WRONLY | O_CREAT | O_APPEND, "append to");
  // Emptied only once it is known to be a regular file of ours to write.
  if (truncate && ::ftruncate(file.get(), 0) != 0) refuse(pathOf(name), errno, "truncate");
  return file;
}

void Directory::checkAppendable(const std::string& name) const {
  checkName(name, path_);
  struct stat info {};
  if (::fstatat(fd(), name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return;
    refuse(pathOf(name), errno, "append to");
  }
  if (S_ISLNK(info.st_mode)) refuse(pathOf(name), ELOOP, "append to");
  if (S_ISDIR(info.st_mode)) refuse(pathOf(name), EISDIR, "append to");
  if (!S_ISREG(info.st_mode)) {
    throw UserError(pathOf(name) + " is not a regular file; gcrun cannot append to it (remove it)");
  }
}

UniqueFd Directory::openLockFile(const std::string& name) const { return openFile(name, O_RDWR | O_CREAT, "lock"); }

void Directory::writeAtomically(const std::string& name, std::string_view contents) const {
  writeAtomicallyInPieces(name, [&](const PieceWriter& write) { write(contents); });
}

void Directory::writeAtomicallyInPieces(const std::string& name,
                                        const std::function<void(const PieceWriter&)>& produce) const {
  checkName(name, path_);
  std::random_device random;
  const std::string temp = "." + name + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(random());
  UniqueFd file(::openat(fd(), temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!file) refuse(pathOf(temp), errno, "write");
  try {
    produce([&](std::string_view piece) { writeAll(file.get(), piece, pathOf(name)); });
    if (::fsync(file.get()) != 0)
      throw std::runtime_error("cannot write " + pathOf(name) + ": fsync: " + errorText(errno));
    if (::close(file.release()) != 0)
      throw std::runtime_error("cannot write " + pathOf(name) + ": close: " + errorText(errno));
    if (::renameat(fd(), temp.c_str(), fd(), name.c_str()) != 0) refuse(pathOf(name), errno, "write");
  } catch (...) {
    ::unlinkat(fd(), temp.c_str(), 0);
    throw;
  }
}

bool Directory::removeFile(const std::string& name) const {
  checkName(name, path_);
  if (::unlinkat(fd(), name.c_str(), 0) == 0) return true;
  if (errno == ENOENT) return false;
  refuse(pathOf(name), errno, "remove");
}

void Directory::removeTree(const std::string& name) const {
  checkName(name, path_);
  UniqueFd below(::openat(fd(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!below) {
    if (errno == ENOENT) return;
    if (errno != ELOOP && errno != ENOTDIR) refuse(pathOf(name), errno, "remove");
    removeFile(name);  // a file or a symlink: the link goes, its target stays
    return;
  }
  const Directory tree(std::move(below), pathOf(name));
  for (const auto& entry : tree.entries()) tree.removeTree(entry);
  if (::unlinkat(fd(), name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) refuse(pathOf(name), errno, "remove");
}

void Directory::moveTo(const std::string& name, const Directory& target, const std::string& to) const {
  checkName(name, path_);
  checkName(to, target.path());
  if (::renameat(fd(), name.c_str(), target.fd(), to.c_str()) != 0) refuse(target.pathOf(to), errno, "write");
}

std::vector<std::string> Directory::entries() const {
  // fdopendir takes the descriptor it is given: hand it a duplicate so that ours stays open.
  const int copy = ::openat(fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (copy < 0) refuse(path_, errno, "list");
  DIR* listing = ::fdopendir(copy);
  if (!listing) {
    ::close(copy);
    refuse(path_, errno, "list");
  }
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(listing)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(listing);
  std::sort(names.begin(), names.end());
  return names;
}

Directory directoryToWrite(const std::string& dir, const std::string& name) {
  try {
    return Directory::open(dir, false);
  } catch (const UserError& e) {
    throw UserError("cannot write '" + dir + "/" + name + "': " + e.what());
  }
}

AppendFile::AppendFile(const std::string& dir, const std::string& name, bool truncate)
    : path_(dir + "/" + name), fd_(directoryToWrite(dir, name).openForAppend(name, truncate)) {
  struct stat info {};
  was_empty_ = ::fstat(fd_.get(), &info) != 0 || info.st_size == 0;
}

AppendFile::~AppendFile() {
  try {
    flush();
  } catch (const std::exception&) {
  }
}

void AppendFile::write(std::string_view text) {
  buffer_.append(text);
  if (buffer_.size() > (64 << 10)) flush();
}

void AppendFile::flush() {
  // Cleared first: a failed write is reported once, not again by every later flush.
  const std::string pending = std::move(buffer_);
  buffer_.clear();
  writeAll(fd_.get(), pending, path_);
}

namespace {

UserError tooLarge(const std::string& path, uint64_t size, size_t limit) {
  return UserError(path + " holds " + std::to_string(size) + " bytes, more than the " + std::to_string(limit) +
                   " gcrun reads from such a file");
}

// Whether `fd` lies on a filesystem whose "regular" files the kernel makes up as they are read
// (/proc/self/environ, /sys/...): their size says 0 or 4096 whatever they hold, so no limit checked
// against it would hold, and what they hold is the machine's state, not data a user meant to give.
bool onKernelFilesystem(int fd) {
  struct statfs info {};
  if (::fstatfs(fd, &info) != 0) return false;
  switch (static_cast<unsigned long>(info.f_type)) {
    case PROC_SUPER_MAGIC:
    case SYSFS_MAGIC:
    case DEBUGFS_MAGIC:
    case TRACEFS_MAGIC:
    case SECURITYFS_MAGIC:
    case CGROUP_SUPER_MAGIC:
    case CGROUP2_SUPER_MAGIC:
    case BPF_FS_MAGIC:
    case EFIVARFS_MAGIC:
      return true;
    default:
      return false;
  }
}

}  // namespace

UniqueFd openBoundedFile(const std::string& path, size_t limit) {
  UniqueFd file(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!file) throw UserError("cannot read " + path + ": " + errorText(errno));
  struct stat info {};
  if (::fstat(file.get(), &info) != 0 || !S_ISREG(info.st_mode)) {
    throw UserError(path + " is not a regular file (a directory, a device or a FIFO)");
  }
  if (onKernelFilesystem(file.get())) {
    throw UserError(path + " is a file of the kernel (procfs or sysfs, such as /proc/self/environ), not data");
  }
  if (static_cast<uint64_t>(info.st_size) > limit) throw tooLarge(path, static_cast<uint64_t>(info.st_size), limit);
  return file;
}

std::string notRegularFileReason(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return errno == ENOENT ? "no such file" : errorText(errno);
  if (S_ISREG(info.st_mode)) return "";
  if (S_ISDIR(info.st_mode)) return "is a directory";
  return "is not a regular file (a device, a FIFO or a socket)";
}

std::string readBoundedFile(const std::string& path, size_t limit) {
  const UniqueFd file = openBoundedFile(path, limit);
  struct stat info {};
  ::fstat(file.get(), &info);
  // A byte past its size now: the read that finds the end needs no larger buffer, so a file that
  // stays as it is is held once (a checkpoint may be gigabytes).
  std::string bytes(static_cast<size_t>(info.st_size) + 1, '\0');
  size_t filled = 0;
  // The file may grow while it is read (a run still writing it): read what fits the limit.
  for (;;) {
    if (filled == bytes.size()) {
      if (filled > limit) throw tooLarge(path, filled, limit);
      bytes.resize(std::min(limit + 1, std::max<size_t>(4096, 2 * bytes.size())));
    }
    const ssize_t got = ::read(file.get(), bytes.data() + filled, bytes.size() - filled);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw UserError("cannot read " + path + ": " + errorText(errno));
    }
    if (got == 0) break;
    filled += static_cast<size_t>(got);
  }
  bytes.resize(filled);
  return bytes;
}

void forEachLine(const std::string& path, size_t limit, size_t max_line,
                 const std::function<void(const std::string&)>& visit) {
  const UniqueFd file = openBoundedFile(path, limit);
  std::string line;
  bool too_long = false;
  char buffer[1 << 16];
  for (size_t total = 0; total < limit;) {
    const ssize_t got = ::read(file.get(), buffer, std::min(sizeof(buffer), limit - total));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw UserError("cannot read " + path + ": " + errorText(errno));
    if (got == 0) break;
    total += static_cast<size_t>(got);
    for (ssize_t i = 0; i < got; ++i) {
      if (buffer[i] == '\n') {
        if (!too_long) visit(line);
        line.clear();
        too_long = false;
      } else if (line.size() < max_line) {
        line += buffer[i];
      } else {
        too_long = true;
      }
    }
  }
  if (!too_long && !line.empty()) visit(line);
}

}  // namespace gcrun::files
