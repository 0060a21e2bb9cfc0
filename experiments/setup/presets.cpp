#include "experiments/setup/presets.h"

#include <filesystem>

#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include "experiments/setup/embedded_yaml.h"
#include "experiments/setup/resolved_experiment.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/config_io.h"
#include "outputs/files/safe_files.h"

namespace gcrun::experiments {
namespace {

const EmbeddedYaml& findPreset(const std::string& name) {
  std::string known;
  for (const auto& preset : embeddedPresets()) {
    if (preset.name == name) return preset;
    known += (known.empty() ? "" : ", ") + std::string(preset.name);
  }
  throw UserError("unknown experiment '" + name + "'; known: " + known + " (see `gcrun list`)");
}

// A regular file's text: a directory or a device (/dev/null) is no settings file, even though
// reading one gives nothing, which would pass for empty settings; a FIFO or /dev/zero would never
// end. Bounded in size.
std::string readConfigFile(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    throw UserError("config file '" + path + "' does not exist; --config takes a YAML file of settings");
  }
  std::string text;
  try {
    text = files::readBoundedFile(path, files::kMaxConfigBytes);
  } catch (const UserError& e) {
    throw UserError("config file: " + std::string(e.what()) + "; --config takes a YAML file of settings");
  }
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    spdlog::info("config file '{}' is empty: the preset's settings apply", path);
  }
  return text;
}

}  // namespace

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

ExperimentConfig resolveExperiment(const std::string& name, const std::string& config_file,
                                   const std::vector<std::string>& assignments) {
  const auto keys = configKeys();
  ExperimentConfig config;
  auto sources = hyperparams::defaultSources(keys);
  hyperparams::applyYaml(config, findPreset(name).yaml, "preset " + name, keys, {&sources, "preset " + name, false});
  if (!config_file.empty()) {
    hyperparams::applyYaml(config, readConfigFile(config_file), "file " + config_file, keys,
                           {&sources, "--config " + config_file, true});
  }
  for (const auto& assignment : assignments) hyperparams::applyAssignment(config, assignment, keys, &sources);
  hyperparams::validate(config, keys);
  config.experiment = name;
  config.sources = std::move(sources);
  return config;
}

}  // namespace gcrun::experiments
