#pragma once

#include <string>
#include <vector>

#include "hyperparams/config.h"

namespace gcrun::experiments {

struct PresetInfo {
  std::string name;
  std::string description;
};

// The presets compiled into gcrun (experiments/presets/*.yaml), sorted by name.
std::vector<PresetInfo> listPresets();

// The configuration of a run, layered: defaults < preset `name` < `config_file` (if not empty) <
// each `key=value` of `assignments`, in order, over the keys registered now (configKeys()); then
// validated. Throws UserError naming the preset, file or key at fault. resolve() then looks up what
// it names. The result's `sources` says which layer gave each key its value (the preset as
// "preset NAME", the file as "--config FILE:LINE").
ExperimentConfig resolveExperiment(const std::string& name, const std::string& config_file,
                                   const std::vector<std::string>& assignments);

}  // namespace gcrun::experiments
