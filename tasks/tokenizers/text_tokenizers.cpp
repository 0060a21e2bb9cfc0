#include "tasks/tokenizers/text_tokenizers.h"

#include <array>
#include <cctype>
#include <cstdio>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"
#include "tasks/data_location.h"
#include "tasks/language_model_data.h"
#include "tasks/token_files.h"
#include "tasks/wikitext.h"

namespace gcrun::tasks {
namespace {

constexpr std::string_view kEos = "<eos>";

// A byte as a message shows it: 'a', or 0x0a for one that is not printable ASCII.
std::string describeByte(unsigned char byte) {
  if (byte > 0x20 && byte < 0x7f) return std::string("'") + static_cast<char>(byte) + "'";
  char text[8];
  std::snprintf(text, sizeof text, "0x%02x", byte);
  return text;
}

class CharacterTokenizer : public Tokenizer {
 public:
  explicit CharacterTokenizer(std::vector<unsigned char> characters) : characters_(std::move(characters)) {
    ids_.fill(-1);
    for (size_t i = 0; i < characters_.size(); ++i) ids_[characters_[i]] = static_cast<int64_t>(i);
  }

  int64_t vocabularySize() const override { return static_cast<int64_t>(characters_.size()); }

  std::vector<int64_t> encode(const std::string& text) const override {
    std::vector<int64_t> ids;
    ids.reserve(text.size());
    for (const char c : text) {
      const auto byte = static_cast<unsigned char>(c);
      if (ids_[byte] < 0) {
        throw UserError("the byte " + describeByte(byte) + " of the text is not in this run's character vocabulary; " +
                        "it knows the " + std::to_string(characters_.size()) + " bytes " + knownBytes());
      }
      ids.push_back(ids_[byte]);
    }
    return ids;
  }

  std::string decode(const std::vector<int64_t>& ids) const override {
    std::string text;
    text.reserve(ids.size());
    for (const int64_t id : ids) text += static_cast<char>(characters_.at(static_cast<size_t>(id)));
    return text;
  }

 private:
  std::string knownBytes() const {
    std::string bytes(characters_.begin(), characters_.end());
    return clipForMessage(bytes, 80);
  }

  std::vector<unsigned char> characters_;
  std::array<int64_t, 256> ids_{};
};

class WordTokenizer : public Tokenizer {
 public:
  explicit WordTokenizer(std::vector<std::string> words) : words_(std::move(words)) {
    for (size_t i = 0; i < words_.size(); ++i) ids_.emplace(words_[i], static_cast<int64_t>(i));
  }

  int64_t vocabularySize() const override { return static_cast<int64_t>(words_.size()); }

  std::vector<int64_t> encode(const std::string& text) const override {
    std::string lower = text;
    for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::vector<int64_t> ids;
    forEachWord(lower, [&](std::string_view word) {
      const auto found = ids_.find(std::string(word));
      ids.push_back(found == ids_.end() ? kUnknownWord : found->second);
    });
    // forEachWord ends every line with "<eos>", a last one without a line break too.
    if (!lower.empty() && lower.back() != '\n') ids.pop_back();
    return ids;
  }

  std::string decode(const std::vector<int64_t>& ids) const override {
    std::string text;
    for (const int64_t id : ids) {
      const std::string& word = words_.at(static_cast<size_t>(id));
      if (word == kEos) {
        text += '\n';
        continue;
      }
      if (!text.empty() && text.back() != '\n') text += ' ';
      text += word;
    }
    return text;
  }

 private:
  std::vector<std::string> words_;
  std::unordered_map<std::string, int64_t> ids_;
};

TokenCorpus runCorpus(const TaskOptions& options, TokenLevel level) {
  if (options.synthetic) {
    throw UserError("task.synthetic: the run trained on random token ids, which have no text form");
  }
  // The files training read (task.*_files or the wiki.*.tokens layout), so that ids match its.
  const std::string dir = resolveDataDir(options.data_dir, kWikiText2Folder);
  return readTokenCorpus(languageModelFiles(dir, languageModelSettings().read(options.settings)), level);
}

}  // namespace

std::unique_ptr<Tokenizer> characterTokenizer(std::vector<unsigned char> characters) {
  return std::make_unique<CharacterTokenizer>(std::move(characters));
}

std::unique_ptr<Tokenizer> wordTokenizer(std::vector<std::string> words) {
  return std::make_unique<WordTokenizer>(std::move(words));
}

std::unique_ptr<Tokenizer> makeCharacterTokenizer(const TaskOptions& options) {
  return characterTokenizer(runCorpus(options, TokenLevel::kChar).characters);
}

std::unique_ptr<Tokenizer> makeWordTokenizer(const TaskOptions& options) {
  return wordTokenizer(runCorpus(options, TokenLevel::kWord).words);
}

}  // namespace gcrun::tasks
