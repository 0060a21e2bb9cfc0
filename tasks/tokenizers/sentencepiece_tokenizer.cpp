#include "tasks/tokenizers/sentencepiece_tokenizer.h"

#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>

#include <ATen/ATen.h>

#include "hyperparams/base/errors.h"
#include "hyperparams/base/machine_memory.h"
#include "tasks/tokenizers/sentencepiece_module.h"
#include "tasks/tokenizers/text_lines.h"

namespace gcrun::tasks {
namespace {

std::string mebibytes(uint64_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; }

std::string readModel(const std::string& path) {
  try {
    return files::readBoundedFile(path, kMaxSentencePieceModelBytes);
  } catch (const UserError& e) {
    throw UserError(std::string("task.tokenizer: ") + e.what() + "; it accepts a SentencePiece .model file");
  }
}

// The ids of one block of lines, as a tensor of `type` that owns a copy of them.
at::Tensor idsOf(std::vector<int>& ids, at::ScalarType type) {
  at::Tensor block = at::from_blob(ids.data(), {static_cast<int64_t>(ids.size())}, at::kInt)
                         .to(type, /*non_blocking=*/false, /*copy=*/true);
  ids.clear();
  return block;
}

// What tells one version of a file from the next without reading it.
struct FileIdentity {
  dev_t device = 0;
  ino_t inode = 0;
  off_t size = 0;
  int64_t modified_ns = 0;
  bool operator==(const FileIdentity& other) const {
    return device == other.device && inode == other.inode && size == other.size && modified_ns == other.modified_ns;
  }
};

std::optional<FileIdentity> fileIdentity(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return std::nullopt;
  return FileIdentity{info.st_dev, info.st_ino, info.st_size,
                      int64_t{info.st_mtim.tv_sec} * 1000000000 + info.st_mtim.tv_nsec};
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& path)
    : path_(path), processor_(nullptr, sentencePiece().release) {
  std::string error;
  processor_.reset(sentencePiece().load(readModel(path), error));
  if (!processor_) {
    throw UserError("task.tokenizer: " + path + " is not a SentencePiece model (" + error +
                    "); it accepts a .model file such as `gcrun data tokenizer` writes");
  }
  end_of_line_ = sentencePiece().end_of_sentence(processor_.get());
  vocabulary_ = sentencePiece().pieces(processor_.get());
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::shared_ptr<const SentencePieceTokenizer> sharedSentencePieceTokenizer(const std::string& path) {
  struct Loaded {
    FileIdentity identity;
    std::shared_ptr<const SentencePieceTokenizer> tokenizer;
  };
  static std::mutex mutex;
  static std::map<std::string, Loaded> loaded;
  const std::optional<FileIdentity> identity = fileIdentity(path);
  const std::lock_guard<std::mutex> lock(mutex);
  if (identity) {
    const auto found = loaded.find(path);
    if (found != loaded.end() && found->second.identity == *identity) return found->second.tokenizer;
  }
  // A file that cannot be stat'ed is left to the constructor, whose error names it.
  auto tokenizer = std::make_shared<const SentencePieceTokenizer>(path);
  if (identity) loaded[path] = Loaded{*identity, tokenizer};
  return tokenizer;
}

int64_t SentencePieceTokenizer::vocabularySize() const { return vocabulary_; }

void SentencePieceTokenizer::encodeLine(const std::string& line, std::vector<int>& ids) const {
  std::string error;
  if (!sentencePiece().encode(processor_.get(), line, ids, error)) {
    throw std::runtime_error("SentencePiece could not encode a line: " + error);
  }
}

std::vector<int64_t> SentencePieceTokenizer::encode(const std::string& text) const {
  std::vector<int> ids;
  size_t begin = 0;
  for (;;) {
    const size_t newline = text.find('\n', begin);
    encodeLine(text.substr(begin, newline == std::string::npos ? std::string::npos : newline - begin), ids);
    if (newline == std::string::npos) break;
    if (end_of_line_ >= 0) ids.push_back(end_of_line_);
    begin = newline + 1;
  }
  return {ids.begin(), ids.end()};
}

std::string SentencePieceTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string text;
  std::vector<int> line;
  const auto flush = [&] {
    std::string piece, error;
    if (!sentencePiece().decode(processor_.get(), line, piece, error)) {
      throw std::runtime_error("SentencePiece could not decode ids: " + error);
    }
    text += piece;
    line.clear();
  };
  for (const int64_t id : ids) {
    if (id < 0 || id >= vocabularySize()) {
      throw std::out_of_range("token id " + std::to_string(id) + " is outside the vocabulary of " + path_);
    }
    if (id == end_of_line_) {
      flush();
      text += '\n';
    } else {
      line.push_back(static_cast<int>(id));
    }
  }
  flush();
  return text;
}

at::Tensor encodeTextFile(const SentencePieceTokenizer& tokenizer, const std::string& path, at::ScalarType type,
                          size_t max_bytes, uint64_t held) {
  const std::string reason = files::notRegularFileReason(path);
  if (!reason.empty()) throw UserError(path + ": " + reason + "; task.level sentencepiece reads text files");
  struct stat info {};
  const uint64_t size = ::stat(path.c_str(), &info) == 0 ? static_cast<uint64_t>(info.st_size) : 0;
  // A piece covers at least one character and the end-of-sentence id a line break: at most a token
  // per byte (NFKC may lengthen a rare character, so this is what to expect, not a bound).
  const uint64_t needed = std::min<uint64_t>(size, max_bytes) * c10::elementSize(type);
  if (held + needed > availableMemoryBytes()) {
    throw UserError(path + ": its ids may need " + mebibytes(needed) + " of memory beside the " + mebibytes(held) +
                    " already held, more than this machine has available; use a smaller file");
  }
  TextLines lines({path}, max_bytes);
  std::vector<at::Tensor> blocks;
  std::vector<int> ids;
  std::string line;
  while (lines.next(line)) {
    tokenizer.encodeLine(line, ids);
    if (lines.lineEnded() && tokenizer.endOfLine() >= 0) ids.push_back(tokenizer.endOfLine());
    if (ids.size() >= (size_t{1} << 20)) blocks.push_back(idsOf(ids, type));
  }
  blocks.push_back(idsOf(ids, type));
  return blocks.size() == 1 ? blocks[0] : at::cat(blocks);
}

}  // namespace gcrun::tasks
