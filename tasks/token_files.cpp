#include "tasks/token_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include <ATen/ATen.h>

#include "hyperparams/base/errors.h"
#include "hyperparams/base/machine_memory.h"
#include "outputs/files/safe_files.h"

namespace gcrun::tasks {
namespace {

const char* const kWhatIsRead =
    "; the wikitext2 and language-model tasks read wiki.train.tokens, wiki.valid.tokens and wiki.test.tokens "
    "from task.data_dir (WikiText-2, or `gcrun data brown --output DIR` for the Brown corpus)";

std::string mebibytes(uint64_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; }

struct TokenFile {
  std::string path;
  files::UniqueFd fd;
  size_t size = 0;  // when opened
};

TokenFile openTokenFile(const std::string& path) {
  TokenFile file{path, {}, 0};
  const std::string reason = files::notRegularFileReason(file.path);
  if (!reason.empty()) throw UserError(file.path + ": " + reason + kWhatIsRead);
  file.fd = files::openBoundedFile(file.path, kMaxTokenFileBytes);
  struct stat info {};
  if (::fstat(file.fd.get(), &info) != 0) throw UserError("cannot read " + file.path + ": " + std::strerror(errno));
  file.size = static_cast<size_t>(info.st_size);
  return file;
}

// Reads the file into `data`, at most `size` bytes (its size when opened: a file that grows
// meanwhile is read as it was); returns how many it read.
size_t readInto(const TokenFile& file, char* data, size_t size) {
  size_t filled = 0;
  while (filled < size) {
    const ssize_t got = ::read(file.fd.get(), data + filled, size - filled);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw UserError("cannot read " + file.path + ": " + std::strerror(errno));
    if (got == 0) break;
    filled += static_cast<size_t>(got);
  }
  return filled;
}

// A split's files' sizes when first opened (one open at a time: a split may have thousands), and
// their sum, refused past kMaxTokenFileBytes or the memory available beside `held`.
std::vector<size_t> splitSizes(const std::vector<std::string>& files, uint64_t held) {
  std::vector<size_t> sizes;
  uint64_t total = 0;
  for (const auto& path : files) {
    sizes.push_back(openTokenFile(path).size);
    total += sizes.back();
    if (total > kMaxTokenFileBytes) {
      throw UserError(path + ": with the files before it in its split, more than the " + mebibytes(kMaxTokenFileBytes) +
                      " gcrun reads as one split's text");
    }
  }
  if (!files.empty()) requireMemory(files.front(), held, total, availableMemoryBytes());
  return sizes;
}

// The files' bytes in order into `data` (room for the sum of `sizes`); returns how many it read.
size_t readSplitInto(const std::vector<std::string>& files, const std::vector<size_t>& sizes, char* data) {
  size_t filled = 0;
  for (size_t i = 0; i < files.size(); ++i) filled += readInto(openTokenFile(files[i]), data + filled, sizes[i]);
  return filled;
}

size_t sum(const std::vector<size_t>& sizes) { return std::accumulate(sizes.begin(), sizes.end(), size_t{0}); }

TokenCorpus readChars(const SplitFiles& files) {
  TokenCorpus corpus;
  uint64_t held = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::vector<size_t> sizes = splitSizes(files[i], held);
    at::Tensor bytes = at::empty({static_cast<int64_t>(sum(sizes))}, at::kByte);
    const size_t read = readSplitInto(files[i], sizes, reinterpret_cast<char*>(bytes.data_ptr<uint8_t>()));
    corpus.ids[i] = bytes.narrow(0, 0, static_cast<int64_t>(read));
    held += bytes.numel();
  }
  corpus.characters = encodeCharacters(corpus.ids);
  corpus.vocabulary = static_cast<int64_t>(corpus.characters.size());
  return corpus;
}

// The split's text lower-cased (ASCII), as torchtext's Field(lower=True).
std::string readLowerCased(const std::vector<std::string>& files, uint64_t held) {
  std::string text = readSplitText(files, held);
  for (auto& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// The training file's vocabulary; its lookups take views, so no word is copied to be looked up.
class WordVocabulary {
 public:
  WordVocabulary(std::string_view train, const std::string& path);
  WordVocabulary(const WordVocabulary&) = delete;  // ids_ views the strings of words_
  WordVocabulary& operator=(const WordVocabulary&) = delete;

  int64_t size() const { return static_cast<int64_t>(words_.size()); }
  const std::vector<std::string>& words() const { return words_; }
  // Two passes over `text`: its tokens counted, then their ids written into a tensor of that size.
  at::Tensor encode(std::string_view text, const std::string& path, uint64_t held) const;

 private:
  template <class Id>
  void fill(std::string_view text, Id* out) const {
    forEachWord(text, [&](std::string_view word) {
      const auto it = ids_.find(word);
      *out++ = static_cast<Id>(it == ids_.end() ? kUnknownWord : it->second);
    });
  }

  std::vector<std::string> words_;
  std::unordered_map<std::string_view, int64_t> ids_;
};

WordVocabulary::WordVocabulary(std::string_view train, const std::string& path) {
  std::unordered_map<std::string_view, int64_t> counts;
  forEachWord(train, [&](std::string_view word) {
    if (counts[word]++ == 0 && counts.size() > kMaxWordVocabulary) {
      throw UserError(path + " holds more than " + std::to_string(kMaxWordVocabulary) +
                      " distinct words, more than gcrun takes as a vocabulary" + kWhatIsRead);
    }
  });
  std::vector<std::pair<std::string_view, int64_t>> sorted;
  for (const auto& [word, count] : counts) {
    if (word != "<unk>" && word != "<pad>") sorted.emplace_back(word, count);
  }
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  words_ = {"<unk>", "<pad>"};
  words_.reserve(sorted.size() + 2);
  for (const auto& entry : sorted) words_.emplace_back(entry.first);
  for (size_t i = 0; i < words_.size(); ++i) ids_.emplace(words_[i], static_cast<int64_t>(i));
}

at::Tensor WordVocabulary::encode(std::string_view text, const std::string& path, uint64_t held) const {
  int64_t tokens = 0;
  forEachWord(text, [&](std::string_view) { ++tokens; });
  const at::ScalarType type = idType(size());
  requireMemory(path, held + text.size(), static_cast<uint64_t>(tokens) * c10::elementSize(type),
                availableMemoryBytes());
  at::Tensor ids = at::empty({tokens}, type);
  switch (type) {
    case at::kByte:
      fill(text, ids.data_ptr<uint8_t>());
      break;
    case at::kShort:
      fill(text, ids.data_ptr<int16_t>());
      break;
    default:
      fill(text, ids.data_ptr<int32_t>());
  }
  return ids;
}

TokenCorpus readWords(const SplitFiles& files) {
  TokenCorpus corpus;
  const std::string train = readLowerCased(files[0], 0);
  const WordVocabulary vocabulary(train, files[0].front());
  corpus.vocabulary = vocabulary.size();
  corpus.words = vocabulary.words();
  corpus.ids[0] = vocabulary.encode(train, files[0].front(), 0);
  for (size_t i = 1; i < files.size(); ++i) {
    uint64_t held = 0;
    for (size_t j = 0; j < i; ++j) held += corpus.ids[j].nbytes();
    corpus.ids[i] = vocabulary.encode(readLowerCased(files[i], held), files[i].front(), held);
  }
  return corpus;
}

}  // namespace

bool isWordSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

at::ScalarType idType(int64_t vocabulary) {
  if (vocabulary <= 256) return at::kByte;
  if (vocabulary <= 32768) return at::kShort;
  return at::kInt;
}

void requireMemory(const std::string& path, uint64_t held, uint64_t needed, uint64_t available) {
  if (held + needed <= available) return;
  throw UserError(path + ": reading it needs " + mebibytes(needed) + " of memory beside the " + mebibytes(held) +
                  " already held for the token files, more than the " + mebibytes(available) +
                  " this machine has available; use a smaller file or a machine with more memory");
}

std::vector<unsigned char> encodeCharacters(std::array<at::Tensor, 3>& bytes) {
  std::array<bool, 256> seen{};
  for (const auto& text : bytes) {
    const uint8_t* data = text.data_ptr<uint8_t>();
    for (int64_t i = 0; i < text.numel(); ++i) seen[data[i]] = true;
  }
  std::vector<unsigned char> vocabulary;
  std::array<uint8_t, 256> rank{};
  for (int byte = 0; byte < 256; ++byte) {
    if (!seen[byte]) continue;
    rank[byte] = static_cast<uint8_t>(vocabulary.size());
    vocabulary.push_back(static_cast<unsigned char>(byte));
  }
  for (auto& text : bytes) {
    uint8_t* data = text.data_ptr<uint8_t>();
    for (int64_t i = 0; i < text.numel(); ++i) data[i] = rank[data[i]];
  }
  return vocabulary;
}

SplitFiles wikiTokenFiles(const std::string& dir) {
  SplitFiles files;
  for (size_t i = 0; i < kTokenFiles.size(); ++i) files[i] = {dir + "/" + kTokenFiles[i]};
  return files;
}

std::string readSplitText(const std::vector<std::string>& files, uint64_t held) {
  const std::vector<size_t> sizes = splitSizes(files, held);
  std::string text(sum(sizes), '\0');
  text.resize(readSplitInto(files, sizes, text.data()));
  return text;
}

TokenCorpus readTokenCorpus(const SplitFiles& files, TokenLevel level) {
  for (const auto& split : files) {
    if (split.empty()) throw std::invalid_argument("readTokenCorpus: a split without files");
  }
  return level == TokenLevel::kChar ? readChars(files) : readWords(files);
}

TokenCorpus readTokenCorpus(const std::string& dir, TokenLevel level) {
  return readTokenCorpus(wikiTokenFiles(dir), level);
}

}  // namespace gcrun::tasks
