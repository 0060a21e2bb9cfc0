#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/core/Tensor.h>

namespace gcrun::tasks {

// The three token files of the wikitext2 and language-model tasks, in this order: training,
// validation, test.
inline constexpr std::array<const char*, 3> kTokenFiles = {"wiki.train.tokens", "wiki.valid.tokens",
                                                           "wiki.test.tokens"};
// Far above WikiText-103's 540 MB training file (docs/security.md).
inline constexpr size_t kMaxTokenFileBytes = size_t{1} << 30;
// Far above WikiText-103's 267,735 words; each distinct word costs about 150 bytes while loading.
inline constexpr size_t kMaxWordVocabulary = size_t{1} << 22;

enum class TokenLevel {
  kChar,  // every byte is a token, numbered by its rank among the distinct bytes of all three files
  kWord,  // wikitext2's tokens (forEachWord) numbered by the training file's vocabulary
};

// The files' ids, held in the smallest integer type that numbers the vocabulary (idType), so that
// memory stays a small multiple of the files' size; a batch converts its ids to int64 itself.
struct TokenCorpus {
  int64_t vocabulary = 0;
  std::array<at::Tensor, 3> ids;   // [tokens of file i], in kTokenFiles' order
  std::vector<std::string> words;  // word level: the token of each id
  // Char level: the byte of each id (encodeCharacters' vocabulary).
  std::vector<unsigned char> characters;
};

// The files of each split, in kTokenFiles' order (training, validation, test); a split's files are
// read in order as one text.
using SplitFiles = std::array<std::vector<std::string>, 3>;

// dir/wiki.{train,valid,test}.tokens, one file per split.
SplitFiles wikiTokenFiles(const std::string& dir);

// Reads each split's files, regular files of at most kMaxTokenFileBytes together, read without
// blocking (files::openBoundedFile), one split at a time and encoded before the next is read
// (readSplitText). A missing, non-regular or kernel (procfs, sysfs) file, too many distinct words,
// or ids that would not fit the memory this machine has available are UserErrors naming the file.
TokenCorpus readTokenCorpus(const SplitFiles& files, TokenLevel level);
// readTokenCorpus(wikiTokenFiles(dir), level).
TokenCorpus readTokenCorpus(const std::string& dir, TokenLevel level);

// One split's files as one text (their bytes in order), with `held` bytes of earlier splits
// already in memory: what any text level encodes. A UserError naming the file that is missing,
// not regular, past kMaxTokenFileBytes with the files before it, or past the memory available.
std::string readSplitText(const std::vector<std::string>& files, uint64_t held);

// uint8 up to 256 ids, int16 up to 32,768, int32 beyond.
at::ScalarType idType(int64_t vocabulary);

// Char level in place: turns each uint8 tensor of bytes into the ranks of its bytes in the sorted
// set of distinct bytes of all of them (nanoGPT's shakespeare_char builds its vocabulary over the
// whole text, so no byte is unknown). Returns that set, the vocabulary.
std::vector<unsigned char> encodeCharacters(std::array<at::Tensor, 3>& bytes);

// Word level, as the reference's torchtext Field(lower=True) sees a file, except that gcrun splits
// on whitespace where the reference ran spaCy's tokenizer: `text` (already lower-cased, ASCII) gives
// each line's whitespace-separated tokens, then "<eos>", so a blank line gives "<eos>" alone, as
// torchtext's LanguageModelingDataset does.
template <class Visit>
void forEachWord(std::string_view text, Visit&& visit);

// torchtext's Vocab: "<unk>" (id 0) and "<pad>" (id 1), then every training token by descending
// count, ties in byte order; tokens outside it are "<unk>".
inline constexpr int64_t kUnknownWord = 0;
inline constexpr int64_t kPaddingWord = 1;

// The bytes of `path` free for ids, with `held` bytes already in use by earlier files: a UserError
// naming the file and the memory needed when `held + needed` exceeds `available`.
void requireMemory(const std::string& path, uint64_t held, uint64_t needed, uint64_t available);

bool isWordSpace(char c);

template <class Visit>
void forEachWord(std::string_view text, Visit&& visit) {
  static constexpr std::string_view kEos = "<eos>";
  size_t position = 0;
  while (position < text.size()) {
    while (position < text.size() && text[position] != '\n') {
      if (isWordSpace(text[position])) {
        ++position;
        continue;
      }
      size_t end = position;
      while (end < text.size() && !isWordSpace(text[end])) ++end;
      visit(text.substr(position, end - position));
      position = end;
    }
    visit(kEos);
    ++position;  // past the line's '\n'
  }
}

}  // namespace gcrun::tasks
