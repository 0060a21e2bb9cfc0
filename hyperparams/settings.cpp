#include "hyperparams/settings.h"

#include <algorithm>
#include <map>

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
  std::function<SettingValues&(ExperimentConfig&)> values;
  std::function<const SettingValues&(const ExperimentConfig&)> given;
  std::function<std::vector<std::string>(const ExperimentConfig&)> selected_owners;
};

const std::map<std::string, SettingSection>& settingSections() {
  static const std::map<std::string, SettingSection> sections = {
      {"reducer",
       {[](ExperimentConfig& c) -> SettingValues& { return c.reducer.settings; },
        [](const ExperimentConfig& c) -> const SettingValues& { return c.reducer.settings; },
        [](const ExperimentConfig& c) { return std::vector<std::string>{c.reducer.name}; }}},
      {"task",
       {[](ExperimentConfig& c) -> SettingValues& { return c.task.settings; },
        [](const ExperimentConfig& c) -> const SettingValues& { return c.task.settings; },
        [](const ExperimentConfig& c) { return std::vector<std::string>{c.task.name}; }}},
      {"output",
       {[](ExperimentConfig& c) -> SettingValues& { return c.output.settings; },
        [](const ExperimentConfig& c) -> const SettingValues& { return c.output.settings; },
        [](const ExperimentConfig& c) { return c.output.sinks; }}},
  };
  return sections;
}

// Every declaration of one key, by owner; they agree on type and rule.
struct Declarations {
  std::map<std::string, SettingSpec> by_owner;
  std::string first_owner;
};

std::map<std::string, Declarations>& declarations() {
  static std::map<std::string, Declarations> table;
  return table;
}

const char* typeName(const SettingValue& value) {
  static const char* const names[] = {"an integer", "a number", "a boolean", "a string"};
  return names[value.index()];
}

KeySpec declaredKey(const std::string& key, const SettingSection& section, const SettingSpec& first) {
  const std::string name = first.name;
  KeySpec spec{key, first.accepted, first.help, nullptr, nullptr};
  spec.set = [section, name, first](ExperimentConfig& config, const YAML::Node& node) {
    SettingValue value = first.default_value;
    if (!parse(node, value) || (first.ok && !first.ok(value))) return false;
    section.values(config)[name] = std::move(value);
    return true;
  };
  spec.get = [section, name, key](const ExperimentConfig& config) {
    const auto& values = section.given(config);
    if (const auto given = values.find(name); given != values.end()) return toNode(given->second);
    const auto& declared = declarations().at(key);
    for (const auto& owner : section.selected_owners(config)) {
      const auto found = declared.by_owner.find(owner);
      if (found != declared.by_owner.end()) return toNode(found->second.default_value);
    }
    return toNode(declared.by_owner.at(declared.first_owner).default_value);
  };
  return spec;
}

}  // namespace

void declareSetting(const std::string& section_name, const std::string& owner, const SettingSpec& spec) {
  const auto section = settingSections().find(section_name);
  if (section == settingSections().end()) {
    throw std::logic_error("declareSetting: no settings section '" + section_name + "'");
  }
  const std::string key = section_name + "." + spec.name;
  auto& declared = declarations()[key];
  if (declared.by_owner.empty()) {
    if (std::any_of(keyTable().begin(), keyTable().end(), [&](const KeySpec& k) { return k.key == key; })) {
      throw UserError(section_name + " '" + owner + "' declares the setting " + key + ", a built-in key");
    }
    declared.first_owner = owner;
    addKey(declaredKey(key, section->second, spec));
  } else {
    const auto& first = declared.by_owner.at(declared.first_owner);
    if (first.default_value.index() != spec.default_value.index() || first.accepted != spec.accepted) {
      throw UserError(section_name + " '" + owner + "' declares " + key + " as " + typeName(spec.default_value) +
                      " (" + spec.accepted + "), but '" + declared.first_owner + "' declares it as " +
                      typeName(first.default_value) + " (" + first.accepted + ")");
    }
  }
  declared.by_owner[owner] = spec;
  for (const auto& alias : spec.aliases) addAlias({alias, key, {}});
}

void declareSettings(const std::string& section, const std::string& owner, const std::vector<SettingSpec>& specs) {
  for (const auto& spec : specs) declareSetting(section, owner, spec);
}

void declareReferenceValue(const std::string& key, const std::string& reference_value, const std::string& value) {
  addReferenceValue(key, reference_value, value);
}

std::string formatSetting(const SettingValue& value) {
  YAML::Emitter out;
  out << toNode(value);
  return out.c_str();
}

}  // namespace gcrun::hyperparams
