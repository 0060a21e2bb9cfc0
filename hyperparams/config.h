#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gcrun {

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
  int64_t test_batch_size = 1000;
};

struct TrainingOptions {
  int64_t epochs = 1;
  // Stop after this many optimizer steps (0: no limit); the run still evaluates at its end.
  int64_t max_steps = 0;
  // Per worker, as in the reference.
  int64_t batch_size = 128;
};

struct OptimizerOptions {
  double learning_rate = 0.1;
  // Learning rate of parameters named like "*conv*weight*" (the reference's conv group); unset: learning_rate.
  std::optional<double> conv_learning_rate;
  double momentum = 0.9;
  std::string momentum_type = "nesterov";  // nesterov | heavy-ball | exponential_moving_average
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

  double conv_lr() const { return conv_learning_rate.value_or(learning_rate); }
  double conv_wd() const { return weight_decay_conv.value_or(weight_decay); }
  double other_wd() const { return weight_decay_other.value_or(weight_decay); }
};

struct ReducerOptions {
  std::string name = "exact";
  int64_t rank = 4;
  bool reuse_query = true;
};

struct DistributedOptions {
  std::string backend = "auto";  // auto | gloo | nccl
  double timeout_s = 300.0;
};

struct OutputOptions {
  std::vector<std::string> sinks = {"console", "jsonl", "csv"};
  // How often (in steps) the console progress line is refreshed when stdout is not a terminal.
  int64_t log_every_steps = 50;
};

struct ExperimentConfig {
  // Name of the preset it came from ("" for a config built from defaults only).
  std::string experiment;
  std::string description;
  int64_t seed = 42;
  std::string device = "cpu";  // cpu | cuda
  TaskOptions task;
  TrainingOptions training;
  OptimizerOptions optimizer;
  ReducerOptions reducer;
  DistributedOptions distributed;
  OutputOptions output;
};

}  // namespace gcrun
