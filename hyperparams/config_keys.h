#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "hyperparams/config.h"
#include "hyperparams/rules.h"

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
};

// A flat name from the reference's train.py config. `values` maps the reference's names for a
// value (its reducer class names, its task names) to gcrun's; other values pass through unchanged.
struct AliasSpec {
  std::string alias;
  std::string key;
  std::map<std::string, std::string> values;
};

// Every key, in the order toYaml() writes them (top-level keys first, then section by section),
// followed by the settings extensions declared (hyperparams/settings.h). Declarations add to both
// tables, so hold no reference across one.
const std::vector<KeySpec>& keyTable();
const std::vector<AliasSpec>& aliasTable();

// How declared settings (settings.cpp) join the tables: a key, an alias (unless it exists), and a
// reference value of every alias of `key`.
void addKey(KeySpec spec);
void addAlias(AliasSpec alias);
void addReferenceValue(const std::string& key, const std::string& reference_value, const std::string& value);

}  // namespace gcrun::hyperparams
