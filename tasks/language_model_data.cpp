#include "tasks/language_model_data.h"

#include <utility>

#include <ATen/ATen.h>

#include "hyperparams/base/errors.h"
#include "tasks/token_sources/file_globs.h"
#include "tasks/token_sources/token_id_splits.h"
#include "tasks/tokenizers/sentencepiece_tokenizer.h"

namespace gcrun::tasks {
namespace {

const std::array<const char*, 3> kFileKeys = {"task.train_files", "task.validation_files", "task.test_files"};
const std::array<const char*, 3> kBinFiles = {"train.bin", "val.bin", ""};

std::array<const std::string*, 3> patternsOf(const LanguageModelOptions& settings) {
  return {&settings.train_files, &settings.validation_files, &settings.test_files};
}

bool testIsValidation(const LanguageModelOptions& settings) {
  return languageModelLevel(settings.level).token_files && settings.test_files.empty();
}

std::string folderOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

std::string sourceOf(const std::vector<std::string>& files, size_t split, const LanguageModelOptions& settings) {
  if (files.size() == 1) return files.front();
  return "the " + std::to_string(files.size()) + " files of " + kFileKeys[split] + " '" + *patternsOf(settings)[split] +
         "'";
}

std::string withThousands(int64_t value) {
  std::string digits = std::to_string(value), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string originOf(const SplitFiles& files, const std::string& dir, const LanguageModelOptions& settings) {
  size_t count = files[0].size() + files[1].size() + (testIsValidation(settings) ? 0 : files[2].size());
  std::string origin = settings.level + " level, " + std::to_string(count) + (count == 1 ? " file" : " files");
  bool globbed = false;
  for (const std::string* pattern : patternsOf(settings)) globbed = globbed || !pattern->empty();
  origin += globbed ? " (task.*_files)" : " in " + dir;
  if (testIsValidation(settings)) origin += "; the test split is the validation files (no task.test_files)";
  return origin;
}

template <TokenLevel kLevel>
void readText(const SplitFiles& files, const LanguageModelOptions& /*settings*/, int64_t /*given_vocabulary*/,
              const std::string& origin, TokenSplits& data) {
  TokenCorpus corpus = readTokenCorpus(files, kLevel);
  data.vocabulary = corpus.vocabulary;
  data.ids = std::move(corpus.ids);
  data.origin = origin;
}

// Each split's files encoded one at a time and joined, each line's pieces ended by the model's
// end-of-sentence id.
void readSentencePieces(const SplitFiles& files, const LanguageModelOptions& settings, int64_t /*given_vocabulary*/,
                        const std::string& origin, TokenSplits& data) {
  const auto shared = sharedSentencePieceTokenizer(requireTokenizerFile(settings));
  const SentencePieceTokenizer& tokenizer = *shared;
  data.vocabulary = tokenizer.vocabularySize();
  uint64_t held = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    std::vector<at::Tensor> parts;
    for (const auto& file : files[i]) {
      parts.push_back(encodeTextFile(tokenizer, file, idType(data.vocabulary), kMaxTokenFileBytes, held));
      held += parts.back().nbytes();
    }
    data.ids[i] = parts.size() == 1 ? parts.front() : at::cat(parts);
  }
  data.origin = origin + "; the pieces of " + tokenizer.path();
}

void readTokenIds(const SplitFiles& files, const LanguageModelOptions& /*settings*/, int64_t given_vocabulary,
                  const std::string& origin, TokenSplits& data) {
  const auto [vocabulary, from] = tokenVocabulary(given_vocabulary, folderOf(files[0].front()));
  TokenIdSplits splits = readTokenIdSplits(files, vocabulary);
  data.vocabulary = splits.vocabulary;
  data.ids = std::move(splits.ids);
  data.origin = std::string(splits.layouts[0]) + ", " + origin + "; vocabulary from " + from;
}

int64_t unsettled(const LanguageModelOptions& /*settings*/) { return 0; }

// A SentencePiece model's pieces are the vocabulary, with or without data.
int64_t modelPieces(const LanguageModelOptions& settings) {
  return sharedSentencePieceTokenizer(requireTokenizerFile(settings))->vocabularySize();
}

// nanoGPT's shakespeare_char has 65 characters; 10,000 is a small word vocabulary (Penn Treebank's).
constexpr int64_t kSyntheticCharVocabulary = 65;
constexpr int64_t kSyntheticWordVocabulary = 10000;

}  // namespace

const std::vector<LanguageModelLevel>& languageModelLevels() {
  static const std::vector<LanguageModelLevel> levels = {
      {"char", "byte ids", readText<TokenLevel::kChar>, unsettled, kSyntheticCharVocabulary, 256, true, false},
      {"word", "the wikitext2 task's tokens", readText<TokenLevel::kWord>, unsettled, kSyntheticWordVocabulary, 0, true,
       false},
      {"sentencepiece", "the pieces of the SentencePiece model task.tokenizer names", readSentencePieces, modelPieces,
       0, 0, true, false},
      {"tokens", "pre-tokenized uint16 files: nanoGPT's train.bin/val.bin, llm.c's shards", readTokenIds, unsettled,
       kSyntheticWordVocabulary, kMaxTokenVocabulary, false, true},
  };
  return levels;
}

std::vector<std::string> languageModelLevelNames() {
  std::vector<std::string> names;
  for (const auto& level : languageModelLevels()) names.emplace_back(level.name);
  return names;
}

const LanguageModelLevel& languageModelLevel(const std::string& name) {
  for (const auto& level : languageModelLevels()) {
    if (name == level.name) return level;
  }
  std::string known;
  for (const auto& level : languageModelLevels()) known += (known.empty() ? "" : ", ") + std::string(level.name);
  throw UserError("task.level: '" + name + "' is not a level; it accepts: " + known);
}

SplitFiles languageModelFiles(const std::string& dir, const LanguageModelOptions& settings) {
  const bool tokens = languageModelLevel(settings.level).token_files;
  SplitFiles files = wikiTokenFiles(dir);
  const auto patterns = patternsOf(settings);
  for (size_t i = 0; i < files.size(); ++i) {
    if (!patterns[i]->empty()) {
      files[i] = expandFileGlob(kFileKeys[i], *patterns[i], dir);
    } else if (tokens && i < 2) {
      files[i] = {dir + "/" + kBinFiles[i]};
    }
  }
  if (testIsValidation(settings)) files[2] = files[1];
  return files;
}

std::shared_ptr<TokenSplits> readLanguageModelData(const std::string& dir, const LanguageModelOptions& settings,
                                                   int64_t given_vocabulary) {
  const LanguageModelLevel& level = languageModelLevel(settings.level);
  const SplitFiles files = languageModelFiles(dir, settings);
  auto data = std::make_shared<TokenSplits>();
  level.read(files, settings, given_vocabulary, originOf(files, dir, settings), *data);
  for (size_t i = 0; i < files.size(); ++i) data->source[i] = sourceOf(files[i], i, settings);
  return data;
}

std::string dataLine(const TokenSplits& data) {
  return "data: " + withThousands(data.ids[0].numel()) + " train / " + withThousands(data.ids[1].numel()) +
         " validation / " + withThousands(data.ids[2].numel()) + " test tokens, vocabulary " +
         withThousands(data.vocabulary) + " (" + data.origin + ")";
}

}  // namespace gcrun::tasks
