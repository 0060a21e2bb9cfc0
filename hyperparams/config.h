#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace gcrun {

// The settings that name one of a few behaviours are parsed once into these; enumNames<E>() gives
// the names users write, in declaration order.
enum class Device { cpu, cuda };
enum class Backend { automatic, gloo, nccl };
enum class MomentumType { nesterov, heavy_ball, exponential_moving_average };
enum class Granularity { layer, model, bucket };

template <class E>
const std::vector<std::string>& enumNames();
template <>
const std::vector<std::string>& enumNames<Device>();
template <>
const std::vector<std::string>& enumNames<Backend>();
template <>
const std::vector<std::string>& enumNames<MomentumType>();
template <>
const std::vector<std::string>& enumNames<Granularity>();

template <class E>
const std::string& nameOf(E value) {
  return enumNames<E>().at(static_cast<size_t>(value));
}

// The value called `name`; std::invalid_argument when none is (config keys check names first).
template <class E>
E enumFromName(const std::string& name) {
  const auto& names = enumNames<E>();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<E>(i);
  }
  throw std::invalid_argument("'" + name + "' names no value");
}

// A value of a setting that an extension declares itself (a reducer's reducer.rank, a plugin's
// reducer.my_key, task.my_key or output.my_key): see hyperparams/settings.h.
using SettingValue = std::variant<int64_t, double, bool, std::string>;
using SettingValues = std::map<std::string, SettingValue>;

// The typed configuration of one experiment. Every field has its default here; the key table in
// hyperparams/config_keys.cpp is the one place that maps dotted keys (and the reference's flat
// aliases) onto these fields, parses and validates values, and dumps them back to YAML.

struct TaskOptions {
  std::string name = "fashion-mnist";
  std::string architecture = "cnn";
  // Empty: the task's default location (for Fashion-MNIST, where dataset-fashion-mnist installs it).
  std::string data_dir;
  // Random data of the real shapes, for smoke runs and benchmarks; marked in every output.
  bool synthetic = false;
  // Training samples (or tokens) of the synthetic data; 0: the real data set's size. For tests.
  int64_t synthetic_samples = 0;
  // At most this many per evaluation batch; on the CPU at most 32 (tasks::evaluationChunk).
  int64_t test_batch_size = 1000;
  // The vocabulary where the data decides it (real word-level data), for `gcrun plan`, which reads
  // no data; 0: from the data. A run refuses a value its data does not have.
  int64_t vocabulary_size = 0;
  // The values given for the tasks' own task.* settings (a plugin task's), as for the reducers'.
  SettingValues settings;
};

// The evaluations at epoch ends.
struct EvaluationOptions {
  // Samples (tokens for language models) of each split, all workers together; 0: the whole split.
  int64_t max_samples = 0;
  // Evaluate after every this many epochs; the run's last epoch (or step) is always evaluated.
  int64_t every_epochs = 1;
  // Also evaluate after every this many steps within an epoch (0: off): curves of runs whose
  // training is one long epoch (the GPT's max_steps).
  int64_t every_steps = 0;
};

struct TrainingOptions {
  int64_t epochs = 1;
  // Stop after this many optimizer steps (0: no limit); the run still evaluates at its end.
  int64_t max_steps = 0;
  // Per worker, as in the reference.
  int64_t batch_size = 128;
};

struct OptimizerOptions {
  // From the optimizer registry (experiments/optimizers/): sgd (the reference's) or adamw.
  std::string name = "sgd";
  double learning_rate = 0.1;
  // Learning rate of parameters named like "*conv*weight*" (the reference's conv group); unset: learning_rate.
  std::optional<double> conv_learning_rate;
  double momentum = 0.9;
  MomentumType momentum_type = MomentumType::nesterov;
  // Weight decay of the conv and "other" groups; the per-group keys override it.
  double weight_decay = 1e-4;
  std::optional<double> weight_decay_conv;
  std::optional<double> weight_decay_other;
  double weight_decay_bn = 0.0;
  // Error feedback: each worker sends gradient + memory and keeps what the reducer did not deliver.
  bool memory = true;
  bool mom_before_reduce = false;
  bool wd_before_reduce = false;
  // Learning-rate schedule: linear warm-up of the factor over fractional epochs, then step decays.
  std::vector<double> decay_at_epochs;
  double decay_with_factor = 10.0;
  // 0: scale by the number of workers, as the reference does when this is unset.
  double scale_lr_with_factor = 0.0;
  double warmup_epochs = 5.0;
  // AdamW's moment decay rates and the term added to its denominator.
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  // AdamW decays the task's embedding tables (Task::embeddingParameters()) too.
  bool decay_embeddings = false;
  // The reduced gradient is clipped to this global L2 norm before the step (either optimizer); 0: no clip.
  double clip_norm = 0.0;
  // From the schedule registry: reference (the epoch-based schedule above) or cosine (nanoGPT's
  // warm-up and cosine decay by step, over the fields below).
  std::string schedule = "reference";
  int64_t warmup_steps = 0;
  // 0: the run's total steps.
  int64_t decay_steps = 0;
  double min_learning_rate = 0.0;

  double conv_lr() const { return conv_learning_rate.value_or(learning_rate); }
  double conv_wd() const { return weight_decay_conv.value_or(weight_decay); }
  double other_wd() const { return weight_decay_other.value_or(weight_decay); }
};

struct ReducerOptions {
  std::string name = "exact";
  // What one compression unit is: each tensor, the whole flattened gradient, or DDP-style buckets
  // of bucket_mb (reducers/granularity.h). These two apply to every reducer.
  Granularity granularity = Granularity::layer;
  double bucket_mb = 25.0;
  // The values given for the reducers' own settings (reducer.rank, ...), by setting name; each
  // reducer declares its settings and their defaults next to its code and reads them from here.
  SettingValues settings;
};

// How the workers' models are kept in agreement (experiments/sync/synchronizer.h).
struct SyncOptions {
  // A strategy from the synchronizer registry; every-step: each step's gradient through the reducer.
  std::string strategy = "every-step";
  // The values given for the strategies' own settings (sync.every, ...), as for the reducers'.
  SettingValues settings;
};

struct DistributedOptions {
  Backend backend = Backend::automatic;
  double timeout_s = 300.0;
  // Logical workers per process: the world is processes x simulated_workers, and a process runs its
  // logical workers' forward and backward passes in turn (experiments/worker/simulated_workers.h).
  int64_t simulated_workers = 1;
};

// Checkpoints land in <run dir>/checkpoints; one is always written at the end of a run and when it
// is interrupted. 0 turns the periodic ones off.
struct CheckpointOptions {
  int64_t every_steps = 0;
  int64_t every_epochs = 0;
};

struct OutputOptions {
  std::vector<std::string> sinks = {"console", "jsonl", "csv"};
  // How often (in steps) the console progress line is refreshed when stdout is not a terminal.
  int64_t log_every_steps = 50;
  // The values given for the sinks' own output.* settings (a plugin sink's), as for the reducers'.
  SettingValues settings;
  // The steps whose timeline goes to trace-rank<r>.json: "" (off), "A-B" or "N" (see StepWindow).
  std::string trace;
  // Every this many steps, rank 0 writes a row per parameter to layers.csv (bits sent, gradient
  // norm, compression error, rank); 0: off.
  int64_t layer_stats_every_steps = 0;
};

// A window of 1-based steps, first..last inclusive.
struct StepWindow {
  int64_t first = 1;
  int64_t last = 1;
  bool contains(int64_t step) const { return step >= first && step <= last; }
};

// "A-B" (1 <= A <= B) or "N" (N >= 1, the window N-N); nothing for anything else, "" included.
std::optional<StepWindow> parseStepWindow(const std::string& text);

// The published result a preset reproduces (the paper's 16-worker tables); run.json and the final
// log line report the run's distance to it. An empty metric means none.
struct PaperResult {
  std::string metric;  // a final metric as run.json names it: "test.accuracy", "validation.perplexity"
  double value = 0;
  double data_per_epoch_mb = 0;  // MiB sent per worker per epoch
  double time_per_batch_ms = 0;  // at 16 workers, on the paper's hardware
  std::string source;            // where in the paper
};

struct ExperimentConfig {
  // Name of the preset it came from ("" for a config built from defaults only).
  std::string experiment;
  std::string description;
  int64_t seed = 42;
  Device device = Device::cpu;
  TaskOptions task;
  TrainingOptions training;
  OptimizerOptions optimizer;
  ReducerOptions reducer;
  SyncOptions sync;
  DistributedOptions distributed;
  EvaluationOptions evaluation;
  CheckpointOptions checkpoint;
  OutputOptions output;
  PaperResult paper;
  // Where each key's value came from, by key ("default", "preset NAME", "--config FILE:LINE",
  // "--set KEY=VALUE"): filled by experiments::resolveExperiment, empty for a config built in code.
  // It describes the config, as `experiment` does, and is no key itself.
  std::map<std::string, std::string> sources;
};

}  // namespace gcrun
