#include "tasks/tokenizers/text_lines.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "hyperparams/base/errors.h"

namespace gcrun::tasks {
namespace {

constexpr size_t kBlockBytes = size_t{64} << 10;

// Where a piece of a line longer than kMaxTextLineBytes ends: after its last space, else before
// the last UTF-8 lead byte (so that no character is cut), else at the limit.
size_t pieceEnd(const std::string& text, size_t begin) {
  const size_t limit = begin + kMaxTextLineBytes;
  for (size_t end = limit; end > begin + 1; --end) {
    if (text[end - 1] == ' ') return end;
  }
  for (size_t end = limit; end > begin + 1; --end) {
    if ((static_cast<unsigned char>(text[end]) & 0xC0) != 0x80) return end;
  }
  return limit;
}

}  // namespace

TextLines::TextLines(std::vector<std::string> paths, size_t max_bytes)
    : paths_(std::move(paths)), max_bytes_(max_bytes) {}

bool TextLines::openNext() {
  if (opened_) ++file_;
  if (file_ >= paths_.size()) return false;
  fd_ = files::openBoundedFile(paths_[file_], max_bytes_);
  opened_ = true;
  file_bytes_ = 0;
  return true;
}

// Appends the current file's next block to the buffer; false at its end (or at max_bytes).
bool TextLines::fill() {
  if (!opened_ || !fd_ || file_bytes_ >= max_bytes_) return false;
  const size_t want = std::min(kBlockBytes, max_bytes_ - file_bytes_);
  buffer_.erase(0, position_);
  position_ = 0;
  const size_t old_size = buffer_.size();
  buffer_.resize(old_size + want);
  ssize_t got = 0;
  do {
    got = ::read(fd_.get(), buffer_.data() + old_size, want);
  } while (got < 0 && errno == EINTR);
  if (got < 0) throw UserError("cannot read " + paths_[file_] + ": " + std::strerror(errno));
  buffer_.resize(old_size + static_cast<size_t>(got));
  file_bytes_ += static_cast<size_t>(got);
  bytes_read_ += static_cast<uint64_t>(got);
  return got > 0;
}

bool TextLines::next(std::string& line) {
  if (!opened_ && !openNext()) return false;
  for (;;) {
    const size_t newline = buffer_.find('\n', position_);
    if (newline != std::string::npos && newline - position_ <= kMaxTextLineBytes) {
      line.assign(buffer_, position_, newline - position_);
      position_ = newline + 1;
      line_ended_ = true;
      return true;
    }
    if (buffer_.size() - position_ > kMaxTextLineBytes) {
      const size_t end = pieceEnd(buffer_, position_);
      line.assign(buffer_, position_, end - position_);
      position_ = end;
      line_ended_ = false;
      return true;
    }
    if (fill()) continue;
    if (position_ < buffer_.size()) {  // the file's last line, without a line break
      line.assign(buffer_, position_, std::string::npos);
      buffer_.clear();
      position_ = 0;
      line_ended_ = false;
      return true;
    }
    buffer_.clear();
    position_ = 0;
    if (!openNext()) return false;
  }
}

std::vector<std::string> textFilesIn(const std::string& dir, size_t max_files, const std::string& flag) {
  files::Directory folder = [&] {
    try {
      return files::Directory::open(dir, false);
    } catch (const UserError& e) {
      throw UserError(flag + ": " + e.what());
    }
  }();
  std::vector<std::string> paths;
  for (const std::string& name : folder.entries()) {
    if (name.empty() || name[0] == '.' || !files::notRegularFileReason(folder.pathOf(name)).empty()) continue;
    paths.push_back(folder.pathOf(name));
    if (paths.size() > max_files) {
      throw UserError(flag + ": " + dir + " holds more than " + std::to_string(max_files) +
                      " files; give a folder of at most that many text files");
    }
  }
  if (paths.empty()) throw UserError(flag + ": " + dir + " holds no regular file; give a folder of text files");
  return paths;
}

}  // namespace gcrun::tasks
