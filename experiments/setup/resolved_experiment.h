#pragma once

#include <string>
#include <vector>

#include "hyperparams/config.h"
#include "hyperparams/config_keys.h"
#include "outputs/metric_sink.h"
#include "reducers/reducer.h"
#include "tasks/task.h"

namespace gcrun::experiments {

// The configuration keys: the built-in ones and the settings of every reducer, task and sink
// registered at the time of the call (a plugin's once it is loaded), each section's owners in the
// order they were registered. Computed from the registries at every call; nothing is cached.
hyperparams::ConfigKeys configKeys();

// One experiment with everything its configuration names looked up once: what every later step
// (the launcher, a worker, a study's plan) takes instead of looking the names up again.
struct ResolvedExperiment {
  ExperimentConfig config;
  reducers::ReducerSpec reducer;  // reducer.name's
  tasks::TaskSpec task;           // task.name's
  // output.sinks', in order, then layers.csv's (outputs/layers/) when output.layer_stats_every_steps
  // is on, whatever output.sinks says.
  std::vector<outputs::SinkSpec> sinks;
  Backend backend = Backend::gloo;  // distributed.backend, with auto decided for the device
  // config.yaml: the built-in keys, the chosen reducer's, task's and sinks' own settings, and any
  // other setting given (hyperparams::toYaml).
  std::string config_yaml;

  // Whether the run reads `key`: a reducer's own setting only when the chosen reducer declares it,
  // every other key always.
  bool reads(const std::string& key) const;
};

// Validates `config` (every value again, as hyperparams::validate, since a config changed in code
// bypasses the setters), checks every name it gives against the registries (task, reducer, sinks),
// what the chosen reducer accepts (error feedback, granularity), and the device and backend against
// this build, so bad input fails before any worker starts. Throws UserError.
ResolvedExperiment resolve(const ExperimentConfig& config);

// Builds the task once, as a worker would, to find bad input (data files, the architecture, a
// batch larger than each of `world_size` workers' data) before anything is written: the launcher's
// check. Throws UserError.
void checkInputs(const ResolvedExperiment& experiment, int world_size);

}  // namespace gcrun::experiments
