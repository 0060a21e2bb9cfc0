#include "hyperparams/settings.h"

#include <algorithm>
#include <map>
#include <memory>

#include "hyperparams/base/errors.h"
#include "hyperparams/config_keys.h"
#include "hyperparams/yaml_values.h"

namespace gcrun::hyperparams {
namespace {

using yaml_values::parse;
using yaml_values::toNode;

// Where a section's declared settings live in the config, and which of their owners it selects
// (the reducer, the task, the sinks in order).
struct SettingSection {
  std::string name;
  std::function<SettingValues&(ExperimentConfig&)> values;
  std::function<const SettingValues&(const ExperimentConfig&)> given;
  std::function<std::vector<std::string>(const ExperimentConfig&)> selected_owners;
};

SettingSection reducerSection() {
  return {"reducer", [](ExperimentConfig& c) -> SettingValues& { return c.reducer.settings; },
          [](const ExperimentConfig& c) -> const SettingValues& { return c.reducer.settings; },
          [](const ExperimentConfig& c) { return std::vector<std::string>{c.reducer.name}; }};
}

SettingSection taskSection() {
  return {"task", [](ExperimentConfig& c) -> SettingValues& { return c.task.settings; },
          [](const ExperimentConfig& c) -> const SettingValues& { return c.task.settings; },
          [](const ExperimentConfig& c) { return std::vector<std::string>{c.task.name}; }};
}

SettingSection outputSection() {
  return {"output", [](ExperimentConfig& c) -> SettingValues& { return c.output.settings; },
          [](const ExperimentConfig& c) -> const SettingValues& { return c.output.settings; },
          [](const ExperimentConfig& c) { return c.output.sinks; }};
}

SettingSection syncSection() {
  return {"sync", [](ExperimentConfig& c) -> SettingValues& { return c.sync.settings; },
          [](const ExperimentConfig& c) -> const SettingValues& { return c.sync.settings; },
          [](const ExperimentConfig& c) { return std::vector<std::string>{c.sync.strategy}; }};
}

// Every declaration of one key, by owner; they agree on type and rule.
struct Declarations {
  std::map<std::string, SettingSpec> by_owner;
  std::string first_owner;
};

const char* typeName(const SettingValue& value) {
  static const char* const names[] = {"an integer", "a number", "a boolean", "a string"};
  return names[value.index()];
}

// `declared` is complete before the key is used: the table is built, then read.
KeySpec declaredKey(const std::string& key, const SettingSection& section, const SettingSpec& first,
                    std::shared_ptr<const Declarations> declared) {
  const std::string name = first.name;
  KeySpec spec{key, first.accepted, first.help, nullptr, nullptr, nullptr, first.choices};
  spec.set = [section, name, first](ExperimentConfig& config, const YAML::Node& node) {
    SettingValue value = first.default_value;
    if (!parse(node, value) || (first.ok && !first.ok(value))) return false;
    section.values(config)[name] = std::move(value);
    return true;
  };
  spec.get = [section, name, declared](const ExperimentConfig& config) {
    const auto& values = section.given(config);
    if (const auto given = values.find(name); given != values.end()) return toNode(given->second);
    for (const auto& owner : section.selected_owners(config)) {
      const auto found = declared->by_owner.find(owner);
      if (found != declared->by_owner.end()) return toNode(found->second.default_value);
    }
    return toNode(declared->by_owner.at(declared->first_owner).default_value);
  };
  spec.written = [section, name, declared](const ExperimentConfig& config) {
    if (section.given(config).count(name) > 0) return true;
    const auto owners = section.selected_owners(config);
    return std::any_of(owners.begin(), owners.end(), [&](const auto& o) { return declared->by_owner.count(o) > 0; });
  };
  return spec;
}

void addAlias(std::vector<AliasSpec>& aliases, AliasSpec alias) {
  const auto same = [&](const AliasSpec& a) { return a.alias == alias.alias; };
  if (std::none_of(aliases.begin(), aliases.end(), same)) aliases.push_back(std::move(alias));
}

// The keys that the owners of one section declare, each key once, in the order first declared.
void addSection(const SettingSection& section, const std::vector<SettingOwner>& owners, std::vector<KeySpec>& keys,
                std::vector<AliasSpec>& aliases) {
  std::vector<std::string> order;
  std::map<std::string, std::shared_ptr<Declarations>> by_key;
  for (const auto& owner : owners) {
    for (const auto& spec : owner.settings) {
      const std::string key = section.name + "." + spec.name;
      auto& declared = by_key[key];
      if (!declared) {
        if (std::any_of(keys.begin(), keys.end(), [&](const KeySpec& k) { return k.key == key; })) {
          throw UserError(section.name + " '" + owner.name + "' declares the setting " + key + ", a built-in key");
        }
        declared = std::make_shared<Declarations>();
        declared->first_owner = owner.name;
        order.push_back(key);
      } else {
        const auto& first = declared->by_owner.at(declared->first_owner);
        if (first.default_value.index() != spec.default_value.index() || first.accepted != spec.accepted) {
          throw UserError(section.name + " '" + owner.name + "' declares " + key + " as " +
                          typeName(spec.default_value) + " (" + spec.accepted + "), but '" + declared->first_owner +
                          "' declares it as " + typeName(first.default_value) + " (" + first.accepted + ")");
        }
      }
      declared->by_owner[owner.name] = spec;
      for (const auto& alias : spec.aliases) addAlias(aliases, {alias, key, {}});
    }
  }
  for (const auto& key : order) {
    const auto& declared = by_key.at(key);
    keys.push_back(declaredKey(key, section, declared->by_owner.at(declared->first_owner), declared));
  }
}

}  // namespace

void addExtensionKeys(const Extensions& extensions, std::vector<KeySpec>& keys, std::vector<AliasSpec>& aliases) {
  addSection(reducerSection(), extensions.reducers, keys, aliases);
  addSection(taskSection(), extensions.tasks, keys, aliases);
  addSection(outputSection(), extensions.sinks, keys, aliases);
  addSection(syncSection(), extensions.strategies, keys, aliases);
  const auto names = [&](const char* key, const std::vector<SettingOwner>& owners) {
    for (auto& spec : keys) {
      if (spec.key != key) continue;
      for (const auto& owner : owners) spec.choices.push_back(owner.name);
    }
  };
  names("reducer.name", extensions.reducers);
  names("task.name", extensions.tasks);
  names("output.sinks", extensions.sinks);
  names("sync.strategy", extensions.strategies);
  for (const auto& [reference_value, value] : extensions.reducer_reference_names) {
    for (auto& alias : aliases) {
      if (alias.key == "reducer.name") alias.values[reference_value] = value;
    }
  }
}

std::string formatSetting(const SettingValue& value) {
  YAML::Emitter out;
  out << toNode(value);
  return out.c_str();
}

}  // namespace gcrun::hyperparams
