#pragma once

#include <optional>
#include <string>
#include <vector>

#include "experiments/optimizers/optimizer.h"
#include "experiments/setup/registered_keys.h"
#include "experiments/setup/request.h"
#include "experiments/setup/resumed_run.h"
#include "experiments/sync/synchronizer.h"
#include "hyperparams/config.h"
#include "outputs/metric_sink.h"
#include "reducers/reducer.h"
#include "tasks/task.h"

namespace gcrun::experiments {

// One experiment with everything its configuration names looked up once: what every later step
// (the launcher, a worker, a study's plan) takes instead of looking the names up again.
struct ResolvedExperiment {
  ExperimentConfig config;
  reducers::ReducerSpec reducer;  // reducer.name's
  tasks::TaskSpec task;           // task.name's
  SynchronizerSpec sync;          // sync.strategy's
  OptimizerSpec optimizer;        // optimizer.name's, its checks passed
  // output.sinks', in order, then layers.csv's (outputs/layers/) when output.layer_stats_every_steps
  // is on, whatever output.sinks says.
  std::vector<outputs::SinkSpec> sinks;
  Backend backend = Backend::gloo;         // distributed.backend, with auto decided for the device
  std::optional<StepWindow> trace_window;  // output.trace's steps; nothing: no trace
  // config.yaml: the built-in keys, the chosen reducer's, task's and sinks' own settings, and any
  // other setting given (hyperparams::toYaml).
  std::string config_yaml;
  // --resume's run, resolved (resumed_run.h); nothing: a new run.
  std::optional<ResumedRun> resume;

  // Whether the run reads `key`: a reducer's (a strategy's) own setting only when the chosen
  // reducer (sync.strategy) declares it, every other key always.
  bool reads(const std::string& key) const;
};

// The one resolution of a `gcrun experiment`, over one key table (the plugins are loaded already):
// the settings layered as layeredConfig says, validated once, and every name looked up as resolve
// says. With --resume the layers are the preset, the run's own config.yaml and --set, and a --set
// that changes what the run's checkpoint holds is refused. Throws UserError naming the preset,
// file, key or value at fault, before anything is written.
ResolvedExperiment resolveExperiment(const ExperimentRequest& request);

// The warning a run of `experiment` deserves before it starts: error feedback (optimizer.memory) on a
// reducer that is not contractive (ReducerSpec::contractive); "" when none.
std::string errorFeedbackWarning(const ResolvedExperiment& experiment);

// The configuration layered: defaults < preset `preset` < `config_file` (if not empty) < each
// `key=value` of `assignments`, in order; then validated. Its `sources` says which layer gave each
// key its value (the preset as "preset NAME", the file as "--config FILE:LINE"). For `gcrun show`
// and for a configuration that code changes before resolve(). Throws UserError.
ExperimentConfig layeredConfig(const std::string& preset, const std::string& config_file,
                               const std::vector<std::string>& assignments);

// Validates `config` (every value again, as hyperparams::validate, since a config changed in code
// bypasses the setters), checks every name it gives against the registries (task, reducer, sinks,
// optimizer and schedule), what the chosen reducer accepts (error feedback, granularity) and the
// optimizer's own checks, output.trace, and the device and backend against this build. Throws
// UserError.
ResolvedExperiment resolve(const ExperimentConfig& config);
// The same over `keys`, the configKeys() its caller has built already.
ResolvedExperiment resolve(const ExperimentConfig& config, const hyperparams::ConfigKeys& keys);

}  // namespace gcrun::experiments
