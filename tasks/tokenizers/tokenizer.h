#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hyperparams/base/registry.h"
#include "hyperparams/config.h"

namespace gcrun::tasks {

// How a language-model run's text becomes token ids and back, for what reads text outside training
// (`gcrun sample`'s prompt and output). The run's task.level names the tokenizer in
// tokenizerRegistry(); its factory builds it from the run's task options (the data folder for the
// char and word levels, whose vocabularies come from the data; task.tokenizer for sentencepiece).
//
// Contract: ids are in [0, vocabularySize()); decode(encode(text)) gives back `text` wherever the
// vocabulary covers it (char level: every byte of the data; word level: modulo whitespace and words
// outside the vocabulary, which become "<unk>"). Both are pure and thread-compatible. A prompt the
// tokenizer cannot represent at all is a UserError naming what is missing.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual int64_t vocabularySize() const = 0;
  virtual std::vector<int64_t> encode(const std::string& text) const = 0;
  // The text of `ids` as a whole; streaming callers decode a growing prefix and print what is new.
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
};

using TokenizerFactory = std::function<std::unique_ptr<Tokenizer>(const TaskOptions& options)>;

// task.level -> tokenizer. Defined in gcrun_tasks (tasks/tokenizer_registry.cpp), which registers
// the built-in levels; a level without an entry (pre-tokenized files) has no text form.
Registry<TokenizerFactory>& tokenizerRegistry();

}  // namespace gcrun::tasks
