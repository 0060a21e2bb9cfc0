#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "outputs/files/safe_files.h"

namespace gcrun::tasks {

// Lines longer than this reach the tokenizers in pieces of at most this many bytes, cut after a
// space where there is one, else before a UTF-8 character: memory holds one piece, whatever the file.
inline constexpr size_t kMaxTextLineBytes = size_t{1} << 20;

// The lines of text files gcrun did not write, pulled one at a time (SentencePiece's trainer pulls
// its sentences): each file is opened only if regular and not of the kernel, without blocking, and
// read up to `max_bytes` even if it grows meanwhile (files::openBoundedFile), in blocks of 64 KiB.
// A file's last line needs no line break; a line break at its very end gives no empty line.
class TextLines {
 public:
  TextLines(std::vector<std::string> paths, size_t max_bytes);

  // The next line without its '\n' (or the next piece of a long one) into `line`; false after the
  // last file's last line. A file that cannot be opened or read is a UserError naming it.
  bool next(std::string& line);
  // Whether the line that next() gave last ended with a line break (false for a piece of a long
  // line, and for a file's last line without one).
  bool lineEnded() const { return line_ended_; }
  // The file the last line came from.
  const std::string& path() const { return paths_[file_]; }
  uint64_t bytesRead() const { return bytes_read_; }

 private:
  bool openNext();
  bool fill();

  std::vector<std::string> paths_;
  size_t max_bytes_;
  size_t file_ = 0;
  bool opened_ = false;
  files::UniqueFd fd_;
  size_t file_bytes_ = 0;  // read from the current file
  std::string buffer_;     // read, not yet given out, from position_ on
  size_t position_ = 0;
  bool line_ended_ = false;
  uint64_t bytes_read_ = 0;
};

// The regular files directly in `dir` (not below them; no hidden ones), sorted by name, at
// most `max_files` of them: the text of a corpus folder. A folder that holds none, or more, is a
// UserError naming `flag` and the folder.
std::vector<std::string> textFilesIn(const std::string& dir, size_t max_files, const std::string& flag);

}  // namespace gcrun::tasks
