#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace gcrun::files {

// Files gcrun did not write are data. Run, study and report directories can come from other
// people (a colleague's outputs/, a paper's artifact, a shared filesystem), so:
//  - below a directory the user named, gcrun creates, truncates, appends to and deletes only
//    through openat() and friends on the directory's descriptor, with O_NOFOLLOW: a symlink
//    planted there is refused (a UserError naming it) or replaced, never written through;
//  - reads are bounded: only regular files, at most a stated size (readBoundedFile).
// The directory the user named may itself be reached through a symlink: that is their choice.

// An owned file descriptor, closed on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  int get() const { return fd_; }
  int release();
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Writes all of `bytes` to `fd` (retrying short writes and EINTR); std::runtime_error naming `path`.
void writeAll(int fd, std::string_view bytes, const std::string& path);

// A directory held open by descriptor; every name is one path component inside it.
class Directory {
 public:
  // Opens `path`, which must be a directory (created with its parents when `create`); a missing
  // or non-directory path is a UserError naming it.
  static Directory open(const std::string& path, bool create);

  const std::string& path() const { return path_; }
  std::string pathOf(const std::string& name) const;
  int fd() const { return fd_.get(); }

  // The directory `name` in this one, created (0755) when `create` and missing. A symlink or
  // anything else there is a UserError naming it; a missing one without `create` too.
  Directory sub(const std::string& name, bool create) const;
  // Whether `name` exists here as a real directory (a symlink does not count).
  bool hasDirectory(const std::string& name) const;
  // Whether `name` exists here in any form, a dangling symlink included.
  bool has(const std::string& name) const;

  // Replaces `name` with `contents` through a temporary file, fsync and rename: readers never see
  // a half-written file, and a symlink at `name` is replaced, not followed.
  void writeAtomically(const std::string& name, std::string_view contents) const;
  // The same for contents made piece by piece: `produce` is handed a writer that writes each piece
  // to the temporary file at once, so that only one piece is in memory (a model's tensors).
  using PieceWriter = std::function<void(std::string_view piece)>;
  void writeAtomicallyInPieces(const std::string& name, const std::function<void(const PieceWriter&)>& produce) const;
  // Opens `name` for writing at its end (created 0644), or emptied first with `truncate`; a symlink
  // or non-regular file there is a UserError naming it.
  UniqueFd openForAppend(const std::string& name, bool truncate = false) const;
  // Opens (creating) `name` read-write for a lock; the same refusals as openForAppend.
  UniqueFd openLockFile(const std::string& name) const;
  // Refuses, as openForAppend would, a `name` here that is a symlink or no regular file, without
  // touching it; a missing one passes. For checks before anything is written.
  void checkAppendable(const std::string& name) const;

  // Removes the file or symlink `name` (never its target); false if there was none.
  bool removeFile(const std::string& name) const;
  // Removes `name` and, for a directory, everything below it, never following a symlink out.
  void removeTree(const std::string& name) const;
  // Moves `name` to `to` in directory `target` (renameat: a symlink at the destination is replaced).
  void moveTo(const std::string& name, const Directory& target, const std::string& to) const;

  // The entries' names (not . and ..), sorted.
  std::vector<std::string> entries() const;

 private:
  Directory(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  UniqueFd openFile(const std::string& name, int flags, const char* what) const;

  UniqueFd fd_;
  std::string path_;
};

// Directory::open(dir, false) for writing `name` in it: a failure names the file, dir/name.
Directory directoryToWrite(const std::string& dir, const std::string& name);

// A file below a Directory, written at its end through a buffer (the text sinks' output): opened
// as Directory::openForAppend does, so never through a symlink.
class AppendFile {
 public:
  // `name` in the directory `dir` (directoryToWrite).
  AppendFile(const std::string& dir, const std::string& name, bool truncate);
  ~AppendFile();  // flushes what it can; errors surface only through flush()

  // Buffered; written out once the buffer passes 64 KiB and at flush().
  void write(std::string_view text);
  // std::runtime_error naming the file when the write fails (a full disk).
  void flush();
  // Whether the file held no bytes when it was opened.
  bool wasEmpty() const { return was_empty_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  UniqueFd fd_;
  std::string buffer_;
  bool was_empty_ = true;
};

// `path` opened for reading if it is a regular file of at most `limit` bytes; otherwise a
// UserError naming the path and why (not a regular file: a FIFO, /dev/zero, a directory; a file
// of the kernel's procfs, sysfs and the like, which calls itself regular but whose size says
// nothing of what a read returns, such as /proc/self/environ; too large; unreadable). Opening never blocks, so a FIFO
// is refused rather than waited on. For a reader that streams; it stops at `limit` itself, as the file may grow
// meanwhile.
UniqueFd openBoundedFile(const std::string& path, size_t limit);

// Why `path` is not a regular file, for a message: "no such file", "is a directory", or "is not a
// regular file (a device, a FIFO or a socket)"; empty when it is one (through symlinks).
std::string notRegularFileReason(const std::string& path);

// The whole of a file openBoundedFile accepts, at most `limit` bytes (a UserError past that).
std::string readBoundedFile(const std::string& path, size_t limit);

// Calls `visit` with each line of a file openBoundedFile accepts, holding one line at a time, read
// up to `limit` bytes even if it grows meanwhile; a line longer than `max_line` bytes (not
// gcrun's) is skipped, and so is an empty last line.
void forEachLine(const std::string& path, size_t limit, size_t max_line,
                 const std::function<void(const std::string&)>& visit);

// Limits on files gcrun reads back; each is far above what gcrun itself writes.
constexpr size_t kMaxConfigBytes = 1 << 20;        // config.yaml, --config, study files
constexpr size_t kMaxRecordBytes = 16 << 20;       // run.json, manifest.json, timer_summary.json, study.json
constexpr size_t kMaxMetricsBytes = 512ull << 20;  // metrics.jsonl

}  // namespace gcrun::files
