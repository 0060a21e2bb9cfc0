#include "hyperparams/config_io.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <utility>

#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"
#include "hyperparams/config_keys.h"
#include "hyperparams/yaml_values.h"

namespace gcrun::hyperparams {
namespace {

const char kAssignmentSource[] = "--set";

// True when `name` is the dotted prefix of some key, e.g. "training".
bool isSection(const std::string& name, const ConfigKeys& keys) {
  return std::any_of(keys.keys().begin(), keys.keys().end(),
                     [&](const KeySpec& s) { return s.key.rfind(name + ".", 0) == 0; });
}

// A YAML value on one line, as messages show it: scalars verbatim, collections in flow style.
std::string render(const YAML::Node& node) {
  if (node.IsScalar()) {
    std::string text;
    for (char c : node.Scalar()) text += c == '\n' ? std::string("\\n") : std::string(1, c);
    return text;
  }
  if (!node.IsSequence() && !node.IsMap()) return "null";
  std::string text;
  for (const auto& item : node) {
    if (!text.empty()) text += ", ";
    text += node.IsMap() ? render(item.first) + ": " + render(item.second) : render(item);
  }
  return node.IsMap() ? "{" + text + "}" : "[" + text + "]";
}

// A YAML value as a message quotes it: in flow style, clipped to one line.
std::string shown(const YAML::Node& node) { return clipForMessage(render(node)); }

size_t editDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitute});
    }
  }
  return row[b.size()];
}

// The known key or alias closest to `name`, if close enough to be a plausible typo. A name without
// a dot is also compared with each key's last part, so `epochs` suggests `training.epochs`.
std::string closestKey(const std::string& name, const ConfigKeys& keys) {
  std::vector<std::string> candidates;
  for (const auto& spec : keys.keys()) candidates.push_back(spec.key);
  for (const auto& alias : keys.aliases()) candidates.push_back(alias.alias);
  const bool dotless = name.find('.') == std::string::npos;
  std::string best;
  size_t best_distance = std::max<size_t>(1, name.size() / 3) + 1;
  for (const auto& candidate : candidates) {
    size_t distance = editDistance(name, candidate);
    if (dotless) distance = std::min(distance, editDistance(name, candidate.substr(candidate.rfind('.') + 1)));
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

UserError unknownKey(const std::string& name, const std::string& source, const ConfigKeys& keys) {
  const std::string suggestion = closestKey(name, keys);
  return UserError(
      "config: unknown key '" + clipForMessage(name) + "' in " + source +
      (suggestion.empty() ? " (`gcrun list keys` lists the known keys)" : " (did you mean '" + suggestion + "'?)"));
}

// The keys one document has set, each with the spelling it was given first (a key or an alias)
// and the line of that spelling (from 1; 0 where the document has no marks).
struct GivenAs {
  std::string name;
  int line = 0;
};
using Given = std::map<std::string, GivenAs>;

// Sets one key or alias; an alias's value may first be translated from the reference's names.
void applyValue(ExperimentConfig& config, const std::string& name, const YAML::Node& value, int line,
                const std::string& source, Given& given, const ConfigKeys& keys) {
  const AliasSpec* alias = keys.findAlias(name);
  const KeySpec& spec = *keys.find(alias ? alias->key : name);
  if (const auto [first, added] = given.emplace(spec.key, GivenAs{name, line}); !added) {
    const std::string& before = first->second.name;
    throw UserError("config: " + spec.key + " is given twice in " + source +
                    (before == name ? "" : " (as " + before + " and as " + name + ")") +
                    "; keep one (--set may override a file)");
  }
  YAML::Node translated = value;
  if (alias && value.IsScalar()) {
    auto it = alias->values.find(value.Scalar());
    if (it != alias->values.end()) translated = YAML::Node(it->second);
  }
  if (!spec.set(config, translated)) {
    const std::string label = alias ? name + " (" + spec.key + ")" : name;
    throw UserError("config: " + label + " = '" + shown(value) + "' in " + source + ": expected " + spec.accepted +
                    yaml_values::beyondFloat(value));
  }
}

// Walks a mapping whose keys may be nested sections, dotted keys or aliases, all relative to `prefix`.
void applyMapping(ExperimentConfig& config, const YAML::Node& mapping, const std::string& prefix,
                  const std::string& source, Given& given, const ConfigKeys& keys) {
  for (const auto& entry : mapping) {
    const std::string name = prefix + shown(entry.first);
    const YAML::Node& value = entry.second;
    const YAML::Mark mark = entry.first.Mark();
    const int line = mark.is_null() ? 0 : mark.line + 1;
    // `task` is both a section and the reference's alias of task.name: a mapping means the section.
    if (value.IsMap() && isSection(name, keys)) {
      applyMapping(config, value, name + ".", source, given, keys);
    } else if (keys.find(name) || keys.findAlias(name)) {
      applyValue(config, name, value, line, source, given, keys);
    } else if (value.IsMap() && value.size() > 0) {
      applyMapping(config, value, name + ".", source, given, keys);  // reports the misspelt leaves in full
    } else {
      throw unknownKey(name, source, keys);
    }
  }
}

std::string position(const YAML::Mark& mark) {
  if (mark.is_null()) return "";
  return " at line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1);
}

// Counts the values under `node`, aliases expanded, stopping once past `budget`.
size_t countValues(const YAML::Node& node, size_t budget) {
  size_t count = 1;
  const auto add = [&](const YAML::Node& child) {
    if (count <= budget) count += countValues(child, budget - count);
  };
  if (node.IsMap()) {
    for (auto it = node.begin(); it != node.end() && count <= budget; ++it) {
      add(it->first);
      add(it->second);
    }
  } else if (node.IsSequence()) {
    for (auto it = node.begin(); it != node.end() && count <= budget; ++it) add(*it);
  }
  return count;
}

YAML::Node load(const std::string& text, const std::string& what) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw UserError("config: invalid YAML in " + what + position(e.mark) + ": " + e.msg);
  }
  if (exceedsValueLimit(root)) {
    throw UserError("config: " + what + " holds more than " + std::to_string(kMaxYamlValues) +
                    " values once its YAML aliases are expanded; a configuration needs far fewer");
  }
  return root;
}

std::string trim(const std::string& text) {
  auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  auto begin = std::find_if_not(text.begin(), text.end(), space);
  auto end = std::find_if_not(text.rbegin(), text.rend(), space).base();
  return begin < end ? std::string(begin, end) : std::string();
}

// Places `value` at the dotted `key` under `node`, creating the sections on the way.
void insert(YAML::Node node, const std::string& key, const YAML::Node& value) {
  const auto dot = key.find('.');
  if (dot == std::string::npos) {
    node[key] = value;
    return;
  }
  insert(node[key.substr(0, dot)], key.substr(dot + 1), value);
}

// The comment toYaml() and toYamlWithSources() open with: the experiment's name, which no key holds.
const char kExperimentHeader[] = "# experiment: ";

std::string experimentHeader(const ExperimentConfig& config) {
  return config.experiment.empty() ? "" : kExperimentHeader + config.experiment + "\n";
}

// A flow-style rendering of one value, as a `key: value` line writes it.
std::string flow(const YAML::Node& value) {
  YAML::Emitter out;
  out.SetNullFormat(YAML::LowerNull);
  out << YAML::Flow << value;
  return out.c_str();
}

// The cosine schedule's keys against each other and the base rate; they hold whatever the
// schedule, so that switching to it later cannot find them wrong.
void checkOptimizerRanges(const OptimizerOptions& o) {
  if (o.decay_steps > 0 && o.warmup_steps > o.decay_steps) {
    throw UserError("config: optimizer.warmup_steps = " + std::to_string(o.warmup_steps) +
                    " is above optimizer.decay_steps = " + std::to_string(o.decay_steps) +
                    "; expected warmup_steps <= decay_steps (or decay_steps 0: the run's total steps)");
  }
  if (o.min_learning_rate > o.learning_rate) {
    throw UserError("config: optimizer.min_learning_rate = " + formatNumber(o.min_learning_rate) +
                    " is above optimizer.learning_rate = " + formatNumber(o.learning_rate) +
                    "; expected a number from 0 to learning_rate");
  }
}

}  // namespace

ValueSources defaultSources(const ConfigKeys& keys) {
  ValueSources sources;
  for (const auto& spec : keys.keys()) sources[spec.key] = "default";
  return sources;
}

bool exceedsValueLimit(const YAML::Node& node) { return countValues(node, kMaxYamlValues) > kMaxYamlValues; }

void applyYaml(ExperimentConfig& config, const std::string& yaml_text, const std::string& source,
               const ConfigKeys& keys, const SourceRecord& record) {
  const YAML::Node root = load(yaml_text, source);
  if (root.IsNull()) return;
  if (!root.IsMap()) {
    throw UserError("config: " + source +
                    " must be a YAML mapping of keys to values (e.g. 'training.epochs: 3'), got '" + shown(root) + "'");
  }
  // Applied to a copy so that a bad key leaves the config as it was.
  ExperimentConfig updated = config;
  Given given;
  applyMapping(updated, root, "", source, given, keys);
  config = std::move(updated);
  if (!record.sources) return;
  for (const auto& [key, as] : given) {
    const bool line = record.with_line && as.line > 0;
    (*record.sources)[key] = record.origin + (line ? ":" + std::to_string(as.line) : "");
  }
}

void applyAssignment(ExperimentConfig& config, const std::string& assignment, const ConfigKeys& keys,
                     ValueSources* sources) {
  const auto equals = assignment.find('=');
  const std::string key = trim(assignment.substr(0, equals));
  if (equals == std::string::npos || key.empty()) {
    throw UserError("config: " + std::string(kAssignmentSource) + " '" + assignment +
                    "' is not of the form key=value (e.g. training.epochs=3)");
  }
  YAML::Node document(YAML::NodeType::Map);
  document[key] =
      load(assignment.substr(equals + 1), "the value of " + std::string(kAssignmentSource) + " '" + assignment + "'");
  ExperimentConfig updated = config;
  Given given;
  applyMapping(updated, document, "", kAssignmentSource, given, keys);
  config = std::move(updated);
  // One key, or several when the value maps a section (training={epochs: 3, batch_size: 8}).
  for (const auto& entry : given) {
    if (sources) (*sources)[entry.first] = std::string(kAssignmentSource) + " " + assignment;
  }
}

void validate(const ExperimentConfig& config, const ConfigKeys& keys) {
  for (const auto& spec : keys.keys()) {
    ExperimentConfig scratch;
    const YAML::Node value = spec.get(config);
    if (!spec.set(scratch, value)) {
      throw UserError("config: " + spec.key + " = '" + shown(value) + "' in the resolved configuration: expected " +
                      spec.accepted + yaml_values::beyondFloat(value));
    }
  }
  checkOptimizerRanges(config.optimizer);
  if (config.distributed.backend == Backend::nccl && config.device != Device::cuda) {
    throw UserError("config: distributed.backend = 'nccl' needs device = 'cuda' (device is '" + nameOf(config.device) +
                    "'); set device=cuda or distributed.backend=gloo");
  }
}

std::string experimentNamedIn(const std::string& yaml_text) {
  const std::string header = kExperimentHeader;
  if (yaml_text.rfind(header, 0) != 0) return "";
  return yaml_text.substr(header.size(), yaml_text.find('\n') - header.size());
}

std::string toYaml(const ExperimentConfig& config, const ConfigKeys& keys) {
  YAML::Node root(YAML::NodeType::Map);
  for (const auto& spec : keys.keys()) {
    if (!spec.written || spec.written(config)) insert(root, spec.key, spec.get(config));
  }
  YAML::Emitter out;
  out.SetNullFormat(YAML::LowerNull);
  out << root;
  return experimentHeader(config) + out.c_str() + "\n";
}

std::string toYamlWithSources(const ExperimentConfig& config, const ConfigKeys& keys, const ValueSources& sources) {
  std::vector<std::pair<std::string, std::string>> lines;
  size_t width = 0;
  for (const auto& spec : keys.keys()) {
    if (spec.written && !spec.written(config)) continue;
    lines.emplace_back(spec.key + ": " + flow(spec.get(config)), spec.key);
    width = std::max(width, lines.back().first.size());
  }
  // The comments in one column, unless a long line (a description) would push them all far right.
  const size_t column = std::min<size_t>(width, 40) + 2;
  std::string text = experimentHeader(config);
  for (const auto& [line, key] : lines) {
    const auto found = sources.find(key);
    const std::string& source = found == sources.end() ? "default" : found->second;
    text +=
        line + std::string(line.size() + 2 < column ? column - line.size() : 2, ' ') + "# " + oneLine(source) + "\n";
  }
  return text;
}

std::vector<KeyInfo> knownKeys(const ConfigKeys& keys) {
  std::vector<KeyInfo> known;
  for (const auto& spec : keys.keys()) {
    KeyInfo info{spec.key, spec.accepted, spec.help, {}};
    for (const auto& alias : keys.aliases()) {
      if (alias.key == spec.key) info.aliases.push_back(alias.alias);
    }
    known.push_back(std::move(info));
  }
  return known;
}

}  // namespace gcrun::hyperparams
