#pragma once

#include <map>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace gcrun::cli::completion {

// Shell completion: the scripts `gcrun completion bash|zsh` prints are fixed text that asks gcrun
// for the candidates of the word under the cursor (`gcrun completion --words -- WORD...`), one per
// line; the scripts only compare and assign them, never evaluate them.

// One --set key and the values it accepts when they are few (empty: any value).
struct KeyChoices {
  std::string key;
  std::vector<std::string> choices;
};

// What the candidates are drawn from besides the CLI11 app itself.
struct Catalogue {
  // Each subcommand's positional values, e.g. "experiment" -> the preset names.
  std::map<std::string, std::vector<std::string>> positionals;
  std::vector<KeyChoices> keys;
};

// The candidates for the last of `words` (the command line after "gcrun", the last word the one
// being completed, "" after a space), each beginning with that word: the subcommands of `app`;
// a subcommand's options (their long names, from `app`) after "-"; its positional values from
// `catalogue`; after --set (or in --set=...) the keys as "KEY=", and after "KEY=" the key's
// choices as "KEY=VALUE". Nothing after an option that takes some other value (a file: the shell
// offers files then) or for a subcommand `app` does not have.
std::vector<std::string> candidates(const CLI::App& app, const std::vector<std::string>& words,
                                    const Catalogue& catalogue);

// The values of every `--plugin PATH` and `--plugin=PATH` in `words` but the last (still being
// typed), in order.
std::vector<std::string> pluginsOnLine(const std::vector<std::string>& words);

// The completion script for `shell`, "bash" or "zsh"; UserError for any other.
const std::string& script(const std::string& shell);

}  // namespace gcrun::cli::completion
