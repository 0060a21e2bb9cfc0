#include "experiments/trainer.h"

#include <chrono>
#include <regex>

#include <torch/torch.h>

#include "experiments/lr_schedule.h"
#include "hyperparams/errors.h"

namespace gcrun::experiments {
namespace {

// The reference's weight-decay groups, chosen by parameter name (powersgd.md 1.3.7), quirks
// included: a top-level `bn1.*` does not match the batch-norm pattern and so gets decayed.
struct ParameterGroup {
  double base_lr;
  double weight_decay;
};

ParameterGroup groupOf(const std::string& name, const OptimizerOptions& options) {
  static const std::regex batch_norm(R"(.*\.bn\d+\.(weight|bias))");
  const bool conv = name.find("conv") != std::string::npos && name.find("weight") != std::string::npos;
  if (conv) return {options.conv_lr(), options.conv_wd()};
  if (std::regex_match(name, batch_norm)) return {options.learning_rate, options.weight_decay_bn};
  return {options.learning_rate, options.other_wd()};
}

// Adds up every worker's metric sums and returns the finalized means.
std::map<std::string, double> reduceMetrics(const tasks::MetricSums& local, const tasks::Task& task,
                                            reducers::Communicator& comm, c10::Device device) {
  std::vector<double> values{local.weight};
  for (const auto& kv : local.sums) values.push_back(kv.second);
  auto packed = torch::tensor(values, torch::kFloat64).to(device);
  comm.allreduceSum(packed);
  packed = packed.cpu();
  tasks::MetricSums total;
  total.weight = packed[0].item<double>();
  size_t i = 1;
  for (const auto& kv : local.sums) total.sums[kv.first] = packed[i++].item<double>();
  return task.finalize(total.means());
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

struct Trainer::State {
  State(const ExperimentConfig& config, tasks::Task& task, reducers::Communicator& comm,
        reducers::Reducer& reducer, outputs::Timer& timer,
        std::vector<std::unique_ptr<outputs::MetricSink>>& sinks)
      : config(config), task(task), comm(comm), reducer(reducer), timer(timer), sinks(sinks) {}

  const ExperimentConfig& config;
  tasks::Task& task;
  reducers::Communicator& comm;
  reducers::Reducer& reducer;
  outputs::Timer& timer;
  std::vector<std::unique_ptr<outputs::MetricSink>>& sinks;

  std::vector<at::Tensor> params, grads, sends, memories, momenta;
  std::vector<ParameterGroup> groups;
  tasks::Shard shard;
  int64_t batches_per_epoch = 0;
  int64_t total_steps = 0;
  int64_t step = 0;
  uint64_t bits = 0;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

  void setUp() {
    const auto& options = config.optimizer;
    for (const auto& item : task.model().named_parameters()) {
      params.push_back(item.value());
      groups.push_back(groupOf(item.key(), options));
      auto zeros = torch::zeros_like(item.value());
      item.value().mutable_grad() = zeros.clone();
      grads.push_back(item.value().grad());
      sends.push_back(torch::zeros_like(zeros));
      memories.push_back(zeros);
      momenta.push_back(at::Tensor());
    }
    shard = {comm.rank(), comm.size()};
    batches_per_epoch = task.batchesPerEpoch(shard);
    if (batches_per_epoch == 0) {
      throw UserError("training.batch_size = " + std::to_string(config.training.batch_size) +
                      " leaves no full batch for each of " + std::to_string(comm.size()) +
                      " workers; use a smaller batch size");
    }
    total_steps = config.training.epochs * batches_per_epoch;
    if (config.training.max_steps > 0) total_steps = std::min(total_steps, config.training.max_steps);
  }

  void addWeightDecay() {
    for (size_t i = 0; i < params.size(); ++i) {
      if (groups[i].weight_decay != 0) grads[i].add_(params[i].detach(), groups[i].weight_decay);
    }
  }

  // m = g on the first step; then m = mu m + g (nesterov, heavy-ball) or mu m + (1 - mu) g (EMA).
  // The update is g + m for nesterov (the reference's form, not PyTorch's g + mu m) and m otherwise.
  // The reference's heavy-ball branch raises after computing m; gcrun applies m, its intent.
  void applyMomentum() {
    const auto& options = config.optimizer;
    const bool ema = options.momentum_type == "exponential_moving_average";
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!momenta[i].defined()) {
        momenta[i] = grads[i].clone();
      } else if (ema) {
        momenta[i].mul_(options.momentum).add_(grads[i], 1.0 - options.momentum);
      } else {
        momenta[i].mul_(options.momentum).add_(grads[i]);
      }
      if (options.momentum_type == "nesterov") {
        grads[i].add_(momenta[i]);
      } else {
        grads[i].copy_(momenta[i]);
      }
    }
  }

  void reduceGradients() {
    for (size_t i = 0; i < grads.size(); ++i) {
      if (config.optimizer.memory) {
        at::add_out(sends[i], grads[i], memories[i]);
      } else {
        sends[i].copy_(grads[i]);
      }
    }
    bits += reducer.reduce(sends, grads, memories);
  }

  void trainStep(const tasks::Batch& batch, double epoch, tasks::MetricSums& train_sums, double& loss_sum) {
    auto batch_scope = timer.scope("batch");
    at::Tensor loss;
    {
      auto scope = timer.scope("batch.forward");
      loss = task.trainLoss(batch, train_sums);
    }
    {
      auto scope = timer.scope("batch.backward");
      for (auto& g : grads) g.zero_();
      loss.backward();
      // Autograd accumulates into the existing gradients in place; re-read them in case a
      // LibTorch version replaces a tensor instead.
      for (size_t i = 0; i < params.size(); ++i) grads[i] = params[i].grad();
    }
    loss_sum += loss.item<double>();
    torch::NoGradGuard no_grad;
    const auto& options = config.optimizer;
    if (options.wd_before_reduce) addWeightDecay();
    if (options.mom_before_reduce) applyMomentum();
    {
      auto scope = timer.scope("batch.reduce");
      reduceGradients();
    }
    if (!options.wd_before_reduce) {
      auto scope = timer.scope("batch.wd");
      addWeightDecay();
    }
    if (!options.mom_before_reduce) {
      auto scope = timer.scope("batch.mom");
      applyMomentum();
    }
    auto scope = timer.scope("batch.step");
    for (size_t i = 0; i < params.size(); ++i) {
      const double lr = learningRate(options, groups[i].base_lr, comm.size(), epoch);
      params[i].detach().add_(grads[i], -lr);
    }
  }

  void report(const outputs::Progress& progress) {
    for (auto& sink : sinks) sink->progress(progress);
  }

  void endEpoch(int64_t epoch, double epoch_position, const tasks::MetricSums& train_sums,
                TrainingResult& result) {
    outputs::EpochSummary summary;
    {
      auto scope = timer.scope("epoch_metrics.collect");
      summary.train = reduceMetrics(train_sums, task, comm, device());
    }
    {
      auto scope = timer.scope("test.last");
      summary.test = reduceMetrics(task.evaluate(shard), task, comm, device());
    }
    summary.epoch = epoch + 1;
    summary.step = step;
    summary.bits = bits;
    summary.elapsed_s = secondsSince(start);
    summary.learning_rate = learningRate(config.optimizer, config.optimizer.learning_rate, comm.size(),
                                         epoch_position);
    result.last_train = summary.train;
    result.last_test = summary.test;
    if (sinks.empty()) return;
    auto emit = [&](const std::string& name, double value, const std::string& split) {
      for (auto& sink : sinks) sink->metric({name, value, split, epoch_position, step, bits});
    };
    for (const auto& kv : summary.train) emit(kv.first, kv.second, "train");
    for (const auto& kv : summary.test) emit(kv.first, kv.second, "test");
    const auto batch_stats = timer.stats().find("batch");
    if (batch_stats != timer.stats().end() && batch_stats->second.events > 0) {
      emit("time_per_batch", batch_stats->second.total_s / batch_stats->second.events, "train");
    }
    emit("learning_rate", summary.learning_rate, "train");
    for (auto& sink : sinks) sink->epochEnd(summary);
  }

  c10::Device device() const {
    return comm.backend() == "nccl" ? c10::Device(c10::kCUDA, -1) : c10::Device(c10::kCPU);
  }
};

Trainer::Trainer(const ExperimentConfig& config, tasks::Task& task, reducers::Communicator& comm,
                 reducers::Reducer& reducer, outputs::Timer& timer,
                 std::vector<std::unique_ptr<outputs::MetricSink>>& sinks)
    : state_(std::make_unique<State>(config, task, comm, reducer, timer, sinks)) {}

Trainer::~Trainer() = default;

TrainingResult Trainer::run() {
  State& s = *state_;
  s.setUp();
  TrainingResult result;
  const auto& training = s.config.training;
  const int64_t samples_per_step = training.batch_size * s.comm.size();
  for (int64_t epoch = 0; epoch < training.epochs && s.step < s.total_steps; ++epoch) {
    auto batches = s.task.trainBatches(s.shard, epoch);
    tasks::MetricSums train_sums;
    double loss_sum = 0;
    int64_t batch_index = 0;
    while (s.step < s.total_steps) {
      auto batch = batches->next();
      if (!batch) break;
      const double position = epoch + static_cast<double>(batch_index) / s.batches_per_epoch;
      s.trainStep(*batch, position, train_sums, loss_sum);
      ++s.step;
      ++batch_index;
      const double elapsed = secondsSince(s.start);
      s.report({s.step, s.total_steps, epoch + 1, training.epochs, loss_sum / batch_index,
                s.step * samples_per_step / std::max(elapsed, 1e-9), elapsed});
    }
    const double position = epoch + static_cast<double>(batch_index) / s.batches_per_epoch;
    s.endEpoch(epoch, position, train_sums, result);
    result.epochs = position;
  }
  result.steps = s.step;
  result.bits = s.bits;
  return result;
}

}  // namespace gcrun::experiments
