#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "hyperparams/config.h"
#include "hyperparams/rules.h"
#include "hyperparams/settings.h"

namespace gcrun::hyperparams {

// One configuration key: how to read its value from YAML (validating it) and write it back.
// config_io.cpp adds the key, the source and `accepted` to the message when set() refuses a value.
struct KeySpec {
  std::string key;       // dotted, e.g. "training.epochs"
  std::string accepted;  // e.g. "an integer >= 1"
  std::string help;
  // Returns false, leaving the config unchanged, when the value is not what `accepted` says.
  std::function<bool(ExperimentConfig&, const YAML::Node&)> set;
  std::function<YAML::Node(const ExperimentConfig&)> get;
  // Whether toYaml() writes the key for `config`: an extension's setting where the config selects
  // one of its owners or gives it a value (a wrapping reducer reads its inner reducer's). Null:
  // always (the built-in keys).
  std::function<bool(const ExperimentConfig&)> written;
  // Rule::choices; for reducer.name, task.name and output.sinks the registered names.
  std::vector<std::string> choices = {};
};

// A flat name from the reference's train.py config. `values` maps the reference's names for a
// value (its reducer class names, its task names) to gcrun's; other values pass through unchanged.
struct AliasSpec {
  std::string alias;
  std::string key;
  std::map<std::string, std::string> values;
};

// The configuration keys: the built-in ones and those `extensions` declare. It is a value, built
// when asked (experiments::configKeys() builds it from the registries), so a plugin's settings are
// keys once it is loaded and nothing global changes. Throws UserError when an extension declares a
// built-in key, or a key another owner declares with another type or rule.
class ConfigKeys {
 public:
  explicit ConfigKeys(const Extensions& extensions = {});

  // In the order toYaml() writes them: top-level keys first, then section by section, then the
  // extensions' settings (reducers', tasks', sinks', strategies', each in the order the owners are listed).
  const std::vector<KeySpec>& keys() const { return keys_; }
  const std::vector<AliasSpec>& aliases() const { return aliases_; }
  const KeySpec* find(const std::string& key) const;
  const AliasSpec* findAlias(const std::string& alias) const;

 private:
  std::vector<KeySpec> keys_;
  std::vector<AliasSpec> aliases_;
};

// Appends the keys and aliases of `extensions` to the built-in ones and makes the names of their
// owners the choices of reducer.name, task.name, output.sinks and sync.strategy (settings.cpp).
void addExtensionKeys(const Extensions& extensions, std::vector<KeySpec>& keys, std::vector<AliasSpec>& aliases);

}  // namespace gcrun::hyperparams
