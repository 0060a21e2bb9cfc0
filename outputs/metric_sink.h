#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hyperparams/base/registry.h"
#include "hyperparams/config.h"
#include "hyperparams/settings.h"

namespace gcrun::outputs {

// One measurement, as the reference's log_metric receives it.
struct MetricEvent {
  std::string name;  // e.g. "cross_entropy", "accuracy", "timer"
  double value = 0;
  std::string split;   // "train", "test", or "" when the metric has none
  double epoch = 0;    // fractional epoch at which it was measured
  int64_t step = 0;    // optimizer steps done
  uint64_t bits = 0;   // cumulative bits sent by one worker
  int64_t window = 0;  // steps averaged into value, for the per-step training metrics; 0 otherwise
};

// Training progress, emitted after every optimizer step.
struct Progress {
  int64_t step = 0;
  int64_t total_steps = 0;
  int64_t epoch = 0;
  int64_t total_epochs = 0;
  double loss = 0;           // running mean of this epoch's training loss on rank 0
  double samples_per_s = 0;  // over all workers
  double elapsed_s = 0;
};

// Once per epoch, after evaluation, with metrics reduced over all workers.
// An evaluation's metrics by split.
struct EvaluatedSplits {
  std::map<std::string, double> validation;  // empty unless the task has a validation split
  std::map<std::string, double> test;
};

struct EpochSummary {
  int64_t epoch = 0;  // 1-based: the epoch just finished
  int64_t step = 0;
  std::map<std::string, double> train;
  std::map<std::string, double> test;
  std::map<std::string, double> validation;  // empty unless the task has a validation split
  // Rank 0's own model, where the workers' models differ between syncs and the global one is what
  // `validation` and `test` evaluate (splits replica_validation, replica_test); empty otherwise.
  EvaluatedSplits replica;
  uint64_t bits = 0;  // cumulative, one worker
  double elapsed_s = 0;
  double learning_rate = 0;
};

// One parameter at one sampled step (output.layer_stats_every_steps), from rank 0's own tensors: a
// row of layers.csv.
struct LayerStatsRow {
  int64_t step = 0;
  std::string parameter;  // as torch::nn::Module::named_parameters() names it
  std::vector<int64_t> shape;
  int64_t elements = 0;
  std::optional<uint64_t> bits;  // what this worker sent for it that step; unknown if its reducer does not say
  double grad_norm = 0;          // ||gradient||, this worker's, before the reduce
  // ||memory|| / ||send||: the share of what this worker sent that the reduce lost (0 for exact
  // averaging); unknown when the send is zero.
  std::optional<double> rel_compression_error;
  std::optional<int64_t> rank;  // of its low-rank approximation; unknown when it was not factorised
};

// A MetricSink receives everything a run reports. Sinks run on rank 0 only and in the training
// thread, so they should be quick; close() is called once at the end of the run (also when it fails).
// Only metric() must be implemented: a sink ignores the events it does not override.
class MetricSink {
 public:
  virtual ~MetricSink() = default;
  virtual void metric(const MetricEvent& event) = 0;
  virtual void progress(const Progress& progress) {}
  virtual void epochEnd(const EpochSummary& summary) {}
  // Every parameter's row of one sampled step, in parameter order: once every
  // output.layer_stats_every_steps steps, never when it is 0.
  virtual void layerStats(const std::vector<LayerStatsRow>& rows) {}
  virtual void close() {}
};

struct SinkContext {
  std::string run_dir;  // where file sinks write
  const ExperimentConfig& config;
  bool resume = false;  // a resumed run: file sinks append to what the run wrote before
  int world_size = 0;   // the workers, simulated ones included; 0: not known
};

using SinkFactory = std::function<std::unique_ptr<MetricSink>(const SinkContext&)>;

// How a sink is registered, as a reducer is (reducers::ReducerSpec): its factory and the settings of
// its own it reads, keys output.<name> once registered; the factory reads them with its
// SettingsSchema from context.config.output.settings.
struct SinkSpec {
  SinkFactory make;
  std::vector<hyperparams::SettingSpec> settings = {};
};

// The sinks `output.sinks` may name; built-ins (console, jsonl, csv) are registered on first use.
// Registering a name again replaces it: that is how user code swaps a built-in for its own.
// layers.csv's sink (outputs/layers/layer_stats.h) has no name here: resolve() adds it to any
// output.sinks whenever output.layer_stats_every_steps is on.
Registry<SinkSpec>& sinkRegistry();

}  // namespace gcrun::outputs
