#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "tasks/language_model.h"
#include "tasks/token_files.h"

namespace gcrun::tasks {

// The language-model task's splits, in order: training, validation, test.
struct TokenSplits {
  int64_t vocabulary = 0;
  // [N] each, of idType(vocabulary) (text levels), int64 (synthetic), or int16 holding uint16 bits
  // (level tokens: windowBatch reads int16 as uint16).
  std::array<at::Tensor, 3> ids;
  std::array<std::string, 3> source;  // the file(s) (or the synthetic split) each came from, for messages
  std::string origin;                 // the level and files, for the line that says what was read
};

// Each split's files for the task's settings, with `dir` (task.data_dir resolved) for relative
// globs: task.train_files / validation_files / test_files (expandFileGlob) where set, otherwise
// dir/wiki.{train,valid,test}.tokens for the text levels and nanoGPT's dir/train.bin, dir/val.bin
// for level tokens, whose test split is the validation files unless task.test_files is set.
SplitFiles languageModelFiles(const std::string& dir, const LanguageModelOptions& settings);

// The splits of languageModelFiles(): text levels through readTokenCorpus, level tokens through
// readTokenIdSplits with tokenVocabulary(`given_vocabulary`, the training files' folder).
std::shared_ptr<TokenSplits> readLanguageModelData(const std::string& dir, const LanguageModelOptions& settings,
                                                   int64_t given_vocabulary);

// One task.level of the language-model task. The table languageModelLevels() is what the level
// key accepts, how the loader reads each level's files, and what synthetic data and a plan take
// for its vocabulary, so that a new level is one entry.
struct LanguageModelLevel {
  const char* name;
  const char* help;  // for the key's help text
  // Fills data.ids and data.vocabulary from each split's files, and data.origin from `origin`
  // (the level, the files); `given_vocabulary` is task.vocabulary_size (0: not given).
  void (*read)(const SplitFiles& files, const LanguageModelOptions& settings, int64_t given_vocabulary,
               const std::string& origin, TokenSplits& data);
  // The vocabulary the settings settle without data (0: the data decides).
  int64_t (*settled)(const LanguageModelOptions& settings);
  int64_t synthetic_vocabulary;  // synthetic ids' vocabulary where settled() gives 0
  int64_t bound;                 // the most ids the level's real data can have (0: only the files bound it)
  bool plan_takes_bound;         // whether a plan may take `bound` as the vocabulary (false: it asks for the key)
  bool token_files;              // nanoGPT's train.bin and val.bin by default, the test split the validation files
};

const std::vector<LanguageModelLevel>& languageModelLevels();
std::vector<std::string> languageModelLevelNames();
// The entry named `name`; a UserError naming task.level and the levels otherwise.
const LanguageModelLevel& languageModelLevel(const std::string& name);

// "data: 1,003,854 train / 111,540 validation / 111,540 test tokens, vocabulary 65 (ORIGIN)".
std::string dataLine(const TokenSplits& data);

}  // namespace gcrun::tasks
