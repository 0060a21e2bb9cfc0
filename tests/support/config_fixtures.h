#pragma once

// What the config tests share: the keys of the registered reducers, tasks and sinks, and a config
// read from one YAML layer.

#include <string>

#include "experiments/setup/resolved_experiment.h"
#include "hyperparams/config_io.h"
#include "hyperparams/config_keys.h"

namespace gcrun::hyperparams {

// Computed when asked, as gcrun does: a test's own registrations are keys from then on.
inline ConfigKeys keys() { return experiments::configKeys(); }

inline ExperimentConfig fromYaml(const std::string& yaml) {
  ExperimentConfig config;
  applyYaml(config, yaml, "preset test", keys());
  return config;
}

}  // namespace gcrun::hyperparams
