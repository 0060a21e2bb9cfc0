#pragma once

#include <string>
#include <vector>

namespace gcrun::experiments {

// What a strategy needs of the rest of the configuration (a reducer, optimizer settings), checked
// all at once: a user who switches sync.strategy on a preset learns every setting to change from
// one message, with the --set flags that change them, instead of one key per try.
class StrategyRequirements {
 public:
  // `example`, when given, names a configuration that already has what the strategy needs.
  explicit StrategyRequirements(std::string strategy, std::string example = "");

  // Unless `met`, key `key` must be `wanted`: `why` says why, `got` is the value it has now.
  StrategyRequirements& require(bool met, const std::string& key, const std::string& wanted, const std::string& got,
                                const std::string& why);

  // A UserError of one line when a requirement is unmet: with one, "<key>: <why>; set <key>=<wanted>
  // (got <got>)"; with more, "sync.strategy=<s> needs N settings changed: ...; add --set ... --set ...".
  void check() const;

 private:
  struct Unmet {
    std::string key, wanted, got, why;
  };
  std::string strategy_, example_;
  std::vector<Unmet> unmet_;
};

}  // namespace gcrun::experiments
