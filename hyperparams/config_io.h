#pragma once

#include <string>
#include <vector>

#include "hyperparams/config.h"

namespace gcrun::hyperparams {

// Every function here throws UserError naming the key, the source ("preset NAME", "file PATH",
// "--set") and what would be accepted; a misspelt key gets the closest known key suggested.

// Applies a YAML mapping on top of `config`. Keys may be nested (`training: {epochs: 3}`), dotted
// (`training.epochs: 3`) or the reference's flat names (`num_epochs: 3`).
void applyYaml(ExperimentConfig& config, const std::string& yaml_text, const std::string& source);

// Applies one `key=value` override; the value is read as YAML (`[150, 250]`, `true`, `0.1`).
void applyAssignment(ExperimentConfig& config, const std::string& assignment);

// Checks between fields that no single key can check alone.
void validate(const ExperimentConfig& config);

// The resolved configuration as YAML, nested by section; applyYaml(toYaml(c)) reproduces c.
std::string toYaml(const ExperimentConfig& config);

struct KeyInfo {
  std::string key;
  std::string accepted;  // e.g. "an integer >= 1", "one of: nesterov, heavy-ball, ..."
  std::string help;
  std::vector<std::string> aliases;
};
std::vector<KeyInfo> knownKeys();

}  // namespace gcrun::hyperparams
