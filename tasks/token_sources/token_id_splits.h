#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace gcrun::tasks {

// nanoGPT's train.py: GPT-2's 50,257 tokens padded up to a multiple of 64.
inline constexpr int64_t kDefaultTokenVocabulary = 50304;
// uint16 ids number at most this many tokens.
inline constexpr int64_t kMaxTokenVocabulary = 65536;

// Pre-tokenized splits (training, validation, test) of uint16 ids, each of mapTokenShard's int16
// (read them through unsignedTokenIds()).
struct TokenIdSplits {
  int64_t vocabulary = 0;
  std::string vocabulary_source;  // "task.vocabulary_size", DIR/meta.pkl's vocab_size, or nanoGPT's default
  std::array<at::Tensor, 3> ids;
  std::array<const char*, 3> layouts = {"", "", ""};  // mapTokenShard's layout of each split's first file
};

// The vocabulary of pre-tokenized files: `given` (task.vocabulary_size) when above 0; else the
// vocab_size of meta.pkl in `meta_dir` (nanoGPT's char datasets write one); else
// kDefaultTokenVocabulary. A UserError naming its source when it is above kMaxTokenVocabulary or
// below 1.
std::pair<int64_t, std::string> tokenVocabulary(int64_t given, const std::string& meta_dir);

// Each split's files mapped (mapTokenShard) and their ids checked against `vocabulary`
// (checkTokenIds). A split of one file stays the mapping; one of several is joined into memory,
// a UserError naming its first file when that exceeds the memory available. A split whose files
// equal the one before it shares its tensor.
TokenIdSplits readTokenIdSplits(const std::array<std::vector<std::string>, 3>& files, int64_t vocabulary);

}  // namespace gcrun::tasks
