#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "hyperparams/config.h"

namespace YAML {
class Node;
}

namespace gcrun::hyperparams {

class ConfigKeys;

// Every function here reads and writes the keys of `keys` (experiments::configKeys(): the built-in
// ones and the registered extensions'). They throw UserError naming the key, the source
// ("preset NAME", "file PATH", "--set") and what would be accepted; a misspelt key gets the closest
// known key suggested.

// Where each key's value came from, by key (aliases under the key they stand for): "default",
// "preset NAME", "--config FILE:LINE" or "--set KEY=VALUE" (the assignment as given). Filled as
// each layer applies its values, the last layer to set a key winning, as `gcrun show --sources`
// prints it and run.json's "sources" records it.
using ValueSources = std::map<std::string, std::string>;

// Every key of `keys` as coming from its default.
ValueSources defaultSources(const ConfigKeys& keys);

// How a YAML layer names itself in `sources`: `origin` for every key it sets, followed by ":LINE"
// (the line of the key in the document, from 1) when `with_line`. No `sources`: nothing recorded.
struct SourceRecord {
  ValueSources* sources = nullptr;
  std::string origin;
  bool with_line = false;
};

// Applies a YAML mapping on top of `config`. Keys may be nested (`training: {epochs: 3}`), dotted
// (`training.epochs: 3`) or the reference's flat names (`num_epochs: 3`). Nothing is changed,
// `record`'s sources included, when it throws.
void applyYaml(ExperimentConfig& config, const std::string& yaml_text, const std::string& source,
               const ConfigKeys& keys, const SourceRecord& record = {});

// Applies one `key=value` override; the value is read as YAML (`[150, 250]`, `true`, `0.1`). When
// `sources` is given, the key is recorded there as coming from "--set " + assignment.
void applyAssignment(ExperimentConfig& config, const std::string& assignment, const ConfigKeys& keys,
                     ValueSources* sources = nullptr);

// Checks every value again (a config built in code bypasses the setters), then what no single key
// can check alone.
void validate(const ExperimentConfig& config, const ConfigKeys& keys);

// The resolved configuration as YAML, nested by section: the built-in keys, the settings of the
// reducer, task and sinks it selects and any other setting given a value (KeySpec::written), so it
// says what the run reads and not every registered reducer's settings; applyYaml(toYaml(c))
// reproduces c.
std::string toYaml(const ExperimentConfig& config, const ConfigKeys& keys);

// The experiment named by the comment toYaml() opens with, which applyYaml() skips: "" for a text
// without one.
std::string experimentNamedIn(const std::string& yaml_text);

// The keys toYaml() writes, one per line as `key: value` in flow style (still YAML that applyYaml
// reads), each followed by a comment naming its source in `sources` ("default" where it has none).
std::string toYamlWithSources(const ExperimentConfig& config, const ConfigKeys& keys, const ValueSources& sources);

// A configuration or a study has at most a few thousand values; YAML aliases can make a few bytes
// stand for billions ("billion laughs"), which would hang whatever walks them. Every YAML document
// gcrun reads from a user is refused past this many values.
constexpr size_t kMaxYamlValues = 10000;

// Whether `node` holds more than kMaxYamlValues values once its aliases are expanded; counting
// stops there, so a bomb costs no more than the limit.
bool exceedsValueLimit(const YAML::Node& node);

struct KeyInfo {
  std::string key;
  std::string accepted;  // e.g. "an integer >= 1", "one of: nesterov, heavy-ball, ..."
  std::string help;
  std::vector<std::string> aliases;
};
// Every key, the extensions' settings of every owner included.
std::vector<KeyInfo> knownKeys(const ConfigKeys& keys);

}  // namespace gcrun::hyperparams
