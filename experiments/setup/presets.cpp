#include "experiments/setup/presets.h"

#include "experiments/setup/embedded_yaml.h"
#include "experiments/setup/registered_keys.h"
#include "hyperparams/config_io.h"

namespace gcrun::experiments {

std::vector<PresetInfo> listPresets() {
  const auto keys = configKeys();
  std::vector<PresetInfo> presets;
  for (const auto& preset : embeddedPresets()) {
    ExperimentConfig config;
    hyperparams::applyYaml(config, preset.yaml, std::string("preset ") + preset.name, keys);
    presets.push_back({preset.name, config.description});
  }
  return presets;
}

}  // namespace gcrun::experiments
