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
  // Training samples (or tokens) of the synthetic data; 0: the real data set's size. For tests.
  int64_t synthetic_samples = 0;
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
  // Rank of the low-rank reducers (powersgd, unbiased-rank, svd, atomo).
  int64_t rank = 4;
  // PowerSGD warm start: reuse the previous step's averaged Q.
  bool reuse_query = true;
  // Extra PowerSGD power iterations per step (the paper's "best approximation" with 2); the
  // reference's RankKReducer only runs 0.
  int64_t n_power_iterations = 0;
  // Added to column norms in Gram-Schmidt, so all-zero columns stay finite.
  double orthogonalization_epsilon = 1e-8;
  // Steps of plain all-reduce before compressing (PyTorch's start_powerSGD_iter; 0: from the start).
  int64_t start_iter = 0;
  // Compress a matrix only if n*m > rate * rank * (n + m) (PyTorch's rule; 0: every matrix).
  double min_compression_rate = 0.0;
  // Fraction of the elements that top-k, random-k and random-block send.
  double compression = 0.01;
  // QSGD's number of quantization levels s.
  int64_t quantization_levels = 256;
  // random-k and random-block multiply what they deliver by numel/k, making them unbiased; the
  // reference does not (biased, meant for error feedback).
  bool rescale = false;
  // What one compression unit is: layer (each tensor), model (the whole flattened gradient) or
  // bucket (DDP-style buckets of bucket_mb).
  std::string granularity = "layer";
  double bucket_mb = 25.0;
};

struct DistributedOptions {
  std::string backend = "auto";  // auto | gloo | nccl
  double timeout_s = 300.0;
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
};

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
  std::string device = "cpu";  // cpu | cuda
  TaskOptions task;
  TrainingOptions training;
  OptimizerOptions optimizer;
  ReducerOptions reducer;
  DistributedOptions distributed;
  CheckpointOptions checkpoint;
  OutputOptions output;
  PaperResult paper;
};

}  // namespace gcrun
