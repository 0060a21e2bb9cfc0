#include "experiments/setup/resolved_experiment.h"

#include <algorithm>
#include <filesystem>

#include <spdlog/spdlog.h>
#include <torch/cuda.h>
#include <yaml-cpp/yaml.h>

#include "experiments/optimizers/optimizer.h"
#include "experiments/setup/embedded_yaml.h"
#include "experiments/setup/memory_estimate.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/config_io.h"
#include "outputs/files/safe_files.h"
#include "outputs/layers/layer_stats.h"
#include "outputs/run_directory.h"
#include "reducers/comm/process_group.h"

namespace gcrun::experiments {
namespace {

using hyperparams::ConfigKeys;

// NCCL takes one rank per GPU, so simulated workers use Gloo.
Backend backendFor(const ExperimentConfig& config) {
  if (config.distributed.backend != Backend::automatic) return config.distributed.backend;
  const bool nccl = config.device == Device::cuda && comm::ncclAvailable() && config.distributed.simulated_workers == 1;
  return nccl ? Backend::nccl : Backend::gloo;
}

void checkReducer(const ExperimentConfig& config, const reducers::ReducerSpec& spec) {
  const auto& name = config.reducer.name;
  if (config.optimizer.memory && !spec.supports_memory) {
    throw UserError("optimizer.memory: reducer '" + name +
                    "' takes no error feedback from gcrun (it is meaningful only without, or keeps its own); "
                    "set optimizer.memory=false");
  }
  const auto& allowed = spec.granularities;
  if (std::find(allowed.begin(), allowed.end(), config.reducer.granularity) == allowed.end()) {
    std::string accepted;
    for (const auto g : allowed) accepted += (accepted.empty() ? "" : ", ") + nameOf(g);
    throw UserError("reducer.granularity: '" + nameOf(config.reducer.granularity) + "' is not supported by reducer '" +
                    name + "'; it accepts: " + accepted);
  }
}

void checkDevice(const ExperimentConfig& config, Backend backend) {
  if (config.device == Device::cuda && !torch::cuda::is_available()) {
    throw UserError("device: 'cuda' requested but no CUDA device is available to this LibTorch; use device=cpu");
  }
  if (backend == Backend::nccl && !comm::ncclAvailable()) {
    throw UserError("distributed.backend: 'nccl' is not available in this build (LibTorch without NCCL); use gloo");
  }
  if (config.distributed.simulated_workers > 1 && backend == Backend::nccl) {
    throw UserError(
        "distributed.simulated_workers: NCCL takes one rank per GPU, so simulated workers need "
        "distributed.backend gloo or auto");
  }
}

// Every name `config` gives looked up, of a config already validated over `keys`.
ResolvedExperiment lookUp(ExperimentConfig config, const ConfigKeys& keys) {
  ResolvedExperiment experiment;
  experiment.backend = backendFor(config);
  checkDevice(config, experiment.backend);
  experiment.task = tasks::taskRegistry().at(config.task.name).factory;
  experiment.reducer = reducers::reducerRegistry().at(config.reducer.name).factory;
  checkReducer(config, experiment.reducer);
  experiment.sync = synchronizerRegistry().at(config.sync.strategy).factory;
  if (experiment.sync.validate) experiment.sync.validate(config);
  experiment.optimizer = checkedOptimizer(config.optimizer);
  for (const auto& sink : config.output.sinks) experiment.sinks.push_back(outputs::sinkRegistry().at(sink).factory);
  if (config.output.layer_stats_every_steps > 0) experiment.sinks.push_back({outputs::makeLayerStatsSink});
  experiment.trace_window = parseStepWindow(config.output.trace);
  experiment.config_yaml = hyperparams::toYaml(config, keys);
  experiment.config = std::move(config);
  checkMemory(experiment, machineMemoryBytes());
  return experiment;
}

const char* presetYaml(const std::string& name) {
  std::string known;
  for (const auto& preset : embeddedPresets()) {
    if (preset.name == name) return preset.yaml;
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

// The layers: defaults < the preset < `config_file` (if not empty) < each of `assignments`, then
// validated, with the sources of their values. `below_set`, when given, receives the settings
// before the assignments.
ExperimentConfig layered(const std::string& preset, const std::string& config_file,
                         const std::vector<std::string>& assignments, const ConfigKeys& keys,
                         ExperimentConfig* below_set = nullptr) {
  const std::string preset_yaml = presetYaml(preset);
  const std::string file_yaml = config_file.empty() ? "" : readConfigFile(config_file);
  ExperimentConfig config;
  config.experiment = preset;
  auto sources = hyperparams::defaultSources(keys);
  hyperparams::applyYaml(config, preset_yaml, "preset " + preset, keys, {&sources, "preset " + preset, false});
  if (!config_file.empty()) {
    hyperparams::applyYaml(config, file_yaml, "file " + config_file, keys, {&sources, "--config " + config_file, true});
  }
  if (below_set) *below_set = config;
  for (const auto& assignment : assignments) hyperparams::applyAssignment(config, assignment, keys, &sources);
  hyperparams::validate(config, keys);
  config.sources = std::move(sources);
  return config;
}

// The resumed run's config.yaml.
std::string savedConfig(const std::string& dir) {
  return outputs::RunDirectory(dir).pathOf(outputs::run_files::kConfig);
}

void checkResumeRequest(const ExperimentRequest& request) {
  const auto& dir = request.resume_dir;
  if (!request.config_file.empty()) {
    throw UserError("--resume: the settings come from " + savedConfig(dir) + "; drop --config");
  }
  if (!request.output_dir.empty()) throw UserError("--resume: the run continues in " + dir + "; drop --output-dir");
  if (!std::filesystem::is_directory(dir)) {
    throw UserError("--resume " + dir + ": no such directory; expected the --output-dir of an earlier run");
  }
  if (const auto why = files::notRegularFileReason(savedConfig(dir)); !why.empty()) {
    throw UserError("--resume " + dir + ": not a gcrun run directory (its config.yaml: " + why +
                    "); expected the --output-dir of an earlier run");
  }
}

// The settings a resumed run may change: how long it goes on, and how it evaluates, records and
// checkpoints. Anything else would not fit the state its checkpoint holds.
bool mayChangeOnResume(const std::string& key) {
  for (const char* prefix : {"training.epochs", "training.max_steps", "evaluation.", "checkpoint.", "output.",
                             "distributed.timeout_s", "description", "paper."}) {
    if (key.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

void checkResumedSettings(const std::string& dir, const ExperimentConfig& saved, const ExperimentConfig& config,
                          const ConfigKeys& keys) {
  for (const auto& spec : keys.keys()) {
    if (mayChangeOnResume(spec.key)) continue;
    YAML::Emitter now, before;
    now << YAML::Flow << spec.get(config);
    before << YAML::Flow << spec.get(saved);
    if (std::string(now.c_str()) != before.c_str()) {
      throw UserError("--resume " + dir + ": " + spec.key + " is " + now.c_str() + " here but " + before.c_str() +
                      " in " + savedConfig(dir) +
                      ", whose checkpoint holds that run's state; a resumed "
                      "run may change only training.epochs, training.max_steps, evaluation.*, checkpoint.*, "
                      "output.* and distributed.timeout_s");
    }
  }
}

// A resumed run's settings: its own config.yaml, with --set over it changing only what may change.
ExperimentConfig resumedConfig(const ExperimentRequest& request, const ConfigKeys& keys) {
  checkResumeRequest(request);
  ExperimentConfig saved;
  auto config = layered(request.preset, savedConfig(request.resume_dir), request.assignments, keys, &saved);
  checkResumedSettings(request.resume_dir, saved, config, keys);
  return config;
}

}  // namespace

namespace {

bool declares(const std::vector<hyperparams::SettingSpec>& settings, const std::string& name) {
  return std::any_of(settings.begin(), settings.end(), [&](const auto& s) { return s.name == name; });
}

}  // namespace

bool ResolvedExperiment::reads(const std::string& key) const {
  if (key == "reducer.name" || key == "reducer.granularity" || key == "reducer.bucket_mb" || key == "sync.strategy") {
    return true;
  }
  for (const auto& [section, settings] :
       {std::pair{std::string("reducer."), &reducer.settings}, std::pair{std::string("sync."), &sync.settings}}) {
    if (key.rfind(section, 0) == 0) return declares(*settings, key.substr(section.size()));
  }
  return true;
}

ResolvedExperiment resolveExperiment(const ExperimentRequest& request) {
  const auto keys = configKeys();
  if (!request.resume_dir.empty()) return lookUp(resumedConfig(request, keys), keys);
  return lookUp(layered(request.preset, request.config_file, request.assignments, keys), keys);
}

ExperimentConfig layeredConfig(const std::string& preset, const std::string& config_file,
                               const std::vector<std::string>& assignments) {
  return layered(preset, config_file, assignments, configKeys());
}

ResolvedExperiment resolve(const ExperimentConfig& config) { return resolve(config, configKeys()); }

ResolvedExperiment resolve(const ExperimentConfig& config, const ConfigKeys& keys) {
  hyperparams::validate(config, keys);
  return lookUp(config, keys);
}

}  // namespace gcrun::experiments
