#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "tasks/tokenizers/tokenizer.h"

namespace gcrun::tasks {

// A SentencePiece model file (the format of Llama's, Gemma's and T5's tokenizers, and of
// `gcrun data tokenizer`) is at most this large: Gemma's 256,000 pieces take 4 MB.
inline constexpr size_t kMaxSentencePieceModelBytes = size_t{64} << 20;

// task.level `sentencepiece`: the pieces of the model file task.tokenizer names. Text is encoded
// line by line, each line's pieces followed by the model's end-of-sentence id (as the word level
// ends each line with <eos>); decode() turns that id back into a line break, so decode(encode(t))
// is t wherever the model's normalisation (NFKC, runs of spaces) leaves t as it is. A model
// without an end-of-sentence piece drops the line breaks.
class SentencePieceTokenizer : public Tokenizer {
 public:
  // Reads `path` (a regular file of at most kMaxSentencePieceModelBytes, files::readBoundedFile);
  // a missing, huge or malformed model is a UserError naming task.tokenizer and the file.
  explicit SentencePieceTokenizer(const std::string& path);
  ~SentencePieceTokenizer() override;

  int64_t vocabularySize() const override;
  std::vector<int64_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;

  // One line's pieces (no line break in `line`), appended to `ids`.
  void encodeLine(const std::string& line, std::vector<int>& ids) const;
  // The end-of-sentence id, or -1 when the model has none.
  int endOfLine() const { return end_of_line_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::unique_ptr<void, void (*)(void*)> processor_;  // SentencePiece's, through sentencePiece()
  int end_of_line_ = -1;
  int64_t vocabulary_ = 0;
};

// The tokenizer of the model file `path`, loaded once per process for as long as the file stays the
// same (device, inode, size and modification time): a run asks for its vocabulary several times
// before it reads the data, and Gemma's 256,000 pieces take a noticeable time to load. Errors as
// the constructor's. Thread-safe; the tokenizer is shared, and const.
std::shared_ptr<const SentencePieceTokenizer> sharedSentencePieceTokenizer(const std::string& path);

// The ids of the text file `path` (a regular file of at most `max_bytes`, read in chunks of a
// line or 1 MiB, whichever is shorter, so that memory holds the ids and one chunk), as encode()
// gives them, in a tensor of `type` (idType(vocabulary), tasks/token_files.h). `held` bytes are
// already in use by earlier splits: ids that could not fit beside them in the memory this machine
// has available are a UserError naming the file, as are a missing or non-regular file.
at::Tensor encodeTextFile(const SentencePieceTokenizer& tokenizer, const std::string& path, at::ScalarType type,
                          size_t max_bytes, uint64_t held);

}  // namespace gcrun::tasks
