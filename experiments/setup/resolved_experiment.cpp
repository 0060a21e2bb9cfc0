#include "experiments/setup/resolved_experiment.h"

#include <algorithm>

#include <torch/cuda.h>

#include "hyperparams/base/errors.h"
#include "hyperparams/config_io.h"
#include "outputs/layers/layer_stats.h"
#include "reducers/comm/process_group.h"

namespace gcrun::experiments {
namespace {

template <class Spec>
std::vector<hyperparams::SettingOwner> ownersOf(const Registry<Spec>& registry) {
  std::vector<hyperparams::SettingOwner> owners;
  for (const auto* entry : registry.inOrderAdded()) owners.push_back({entry->name, entry->factory.settings});
  return owners;
}

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
                    "' is only meaningful without error feedback; set optimizer.memory=false");
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

}  // namespace

hyperparams::ConfigKeys configKeys() {
  hyperparams::Extensions extensions;
  extensions.reducers = ownersOf(reducers::reducerRegistry());
  extensions.tasks = ownersOf(tasks::taskRegistry());
  extensions.sinks = ownersOf(outputs::sinkRegistry());
  for (const auto* entry : reducers::reducerRegistry().inOrderAdded()) {
    const auto& reference_name = entry->factory.reference_name;
    if (!reference_name.empty()) extensions.reducer_reference_names[reference_name] = entry->name;
  }
  return hyperparams::ConfigKeys(extensions);
}

bool ResolvedExperiment::reads(const std::string& key) const {
  const std::string section = "reducer.";
  if (key.rfind(section, 0) != 0 || key == "reducer.name" || key == "reducer.granularity" ||
      key == "reducer.bucket_mb") {
    return true;
  }
  const std::string name = key.substr(section.size());
  return std::any_of(reducer.settings.begin(), reducer.settings.end(), [&](const auto& s) { return s.name == name; });
}

ResolvedExperiment resolve(const ExperimentConfig& config) {
  const auto keys = configKeys();
  hyperparams::validate(config, keys);
  ResolvedExperiment experiment;
  experiment.config = config;
  experiment.task = tasks::taskRegistry().at(config.task.name).factory;
  experiment.reducer = reducers::reducerRegistry().at(config.reducer.name).factory;
  checkReducer(config, experiment.reducer);
  for (const auto& sink : config.output.sinks) experiment.sinks.push_back(outputs::sinkRegistry().at(sink).factory);
  if (config.output.layer_stats_every_steps > 0) experiment.sinks.push_back({outputs::makeLayerStatsSink});
  experiment.backend = backendFor(config);
  checkDevice(config, experiment.backend);
  experiment.config_yaml = hyperparams::toYaml(config, keys);
  return experiment;
}

void checkInputs(const ResolvedExperiment& experiment, int world_size) {
  const auto& config = experiment.config;
  auto task = experiment.task.make(
      tasks::TaskContext{config.task, config.training.batch_size, static_cast<uint64_t>(config.seed), c10::kCPU});
  tasks::batchesPerEpochOf(*task, {0, world_size}, config.training.batch_size);
}

}  // namespace gcrun::experiments
