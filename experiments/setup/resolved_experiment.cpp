#include "experiments/setup/resolved_experiment.h"

#include <algorithm>
#include <filesystem>

#include <spdlog/spdlog.h>
#include <torch/cuda.h>

#include "experiments/optimizers/optimizer.h"
#include "experiments/setup/embedded_yaml.h"
#include "experiments/setup/memory_estimate.h"
#include "experiments/setup/plan_resolution.h"
#include "experiments/setup/resumed_run.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/config_io.h"
#include "outputs/files/safe_files.h"
#include "outputs/layers/layer_stats.h"
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

// Every name `config` gives looked up, of a config already validated over `keys`; with
// `check_memory`, a run this machine could not hold is refused.
ResolvedExperiment lookUp(ExperimentConfig config, const ConfigKeys& keys, bool check_memory = true) {
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
  if (check_memory) checkMemory(experiment, machineMemoryBytes());
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
  // A resumed run's settings are its own config.yaml, with --set over it changing only what may change.
  std::optional<ResumedRun> resume;
  if (!request.resume_dir.empty()) resume = resumedRunOf(request);
  ExperimentConfig below_set;
  auto config = layered(request.preset, resume ? resume->configFile() : request.config_file, request.assignments, keys,
                        &below_set);
  if (resume) checkResumedSettings(*resume, below_set, config, keys);
  auto experiment = lookUp(std::move(config), keys);
  experiment.resume = std::move(resume);
  return experiment;
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

std::string errorFeedbackWarning(const ResolvedExperiment& experiment) {
  const auto& config = experiment.config;
  if (!config.optimizer.memory || experiment.reducer.contractive) return "";
  return "optimizer.memory: reducer '" + config.reducer.name +
         "' is an unbiased stochastic quantizer whose error can exceed the gradient itself; error feedback "
         "may then grow without bound (QSGD at 15 levels diverged within a few syncs: bench/qsgd-finding.md). "
         "It needs no error feedback: set optimizer.memory=false";
}

ResolvedExperiment resolveForPlan(const ExperimentConfig& config) {
  const auto keys = configKeys();
  hyperparams::validate(config, keys);
  return lookUp(config, keys, /*check_memory=*/false);
}

}  // namespace gcrun::experiments
