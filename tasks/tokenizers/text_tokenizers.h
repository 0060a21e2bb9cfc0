#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tasks/tokenizers/tokenizer.h"

namespace gcrun::tasks {

// The char level's tokenizer: id i is the i-th of `characters`, the sorted distinct bytes of the
// run's three token files (TokenCorpus::characters, as training numbered them). A byte of a prompt
// outside them is a UserError naming it and listing (abbreviated) the bytes the run knows.
std::unique_ptr<Tokenizer> characterTokenizer(std::vector<unsigned char> characters);

// The word level's tokenizer over `words` (TokenCorpus::words: "<unk>", "<pad>", then the training
// file's words). encode() reads text as training read its files (lower-cased, forEachWord: a line
// break is "<eos>"; none after a last line without one); unknown words are "<unk>". decode() joins
// a line's words with single spaces and turns "<eos>" into a line break.
std::unique_ptr<Tokenizer> wordTokenizer(std::vector<std::string> words);

// The registry's factories: the vocabulary read from the run's data (task.data_dir, default
// WikiText-2's), as training read it. Synthetic data has no text: a UserError saying so.
std::unique_ptr<Tokenizer> makeCharacterTokenizer(const TaskOptions& options);
std::unique_ptr<Tokenizer> makeWordTokenizer(const TaskOptions& options);

}  // namespace gcrun::tasks
