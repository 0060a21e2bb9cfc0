#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

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

// "data: 1,003,854 train / 111,540 validation / 111,540 test tokens, vocabulary 65 (ORIGIN)".
std::string dataLine(const TokenSplits& data);

}  // namespace gcrun::tasks
