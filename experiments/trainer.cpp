#include "experiments/trainer.h"

#include <chrono>
#include <optional>
#include <stdexcept>
#include <cmath>
#include <regex>

#include <torch/torch.h>

#include "experiments/gradient_exchange.h"
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

  std::unique_ptr<GradientExchange> exchange;
  // grads[i] is params[i]'s .grad, memories[i] its error feedback: the exchange's tensors.
  std::vector<at::Tensor> params, grads, memories, momenta;
  std::vector<std::string> names;
  std::vector<ParameterGroup> groups;
  tasks::Shard shard;
  int64_t batches_per_epoch = 0;
  int64_t total_steps = 0;
  int64_t step = 0;
  uint64_t bits = 0;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  // Where the loop is, as a checkpoint records it: the next batch is `batch_index` of `epoch`.
  int64_t epoch = 0;
  int64_t batch_index = 0;
  // A mid-epoch checkpoint's task state, loaded once its epoch's batches are set up again.
  std::optional<tasks::Task::State> resumed_task_state;
  tasks::MetricSums train_sums;  // this epoch's, so far
  double loss_sum = 0;
  CheckpointStore* checkpoints = nullptr;
  bool set_up = false;
  std::function<bool()> stop_requested;

  void setUp() {
    if (set_up) return;
    set_up = true;
    const auto& options = config.optimizer;
    for (const auto& item : task.model().named_parameters()) {
      params.push_back(item.value());
      names.push_back(item.key());
      groups.push_back(groupOf(item.key(), options));
    }
    exchange = std::make_unique<GradientExchange>(
        params, names, reducer, GradientExchange::Options{options.memory, task.localGradientClipNorm()},
        [this](size_t i) {
          if (config.optimizer.wd_before_reduce) addWeightDecay(i);
          if (config.optimizer.mom_before_reduce) applyMomentum(i);
        });
    grads = exchange->gradients();
    memories = exchange->memories();
    momenta.resize(params.size());
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

  void addWeightDecay(size_t i) {
    if (groups[i].weight_decay != 0) grads[i].add_(params[i].detach(), groups[i].weight_decay);
  }

  // m = g on the first step; then m = mu m + g (nesterov, heavy-ball) or mu m + (1 - mu) g (EMA).
  // The update is g + m for nesterov (the reference's form, not PyTorch's g + mu m) and m otherwise.
  // The reference's heavy-ball branch raises after computing m; gcrun applies m, its intent.
  void applyMomentum(size_t i) {
    const auto& options = config.optimizer;
    if (!momenta[i].defined()) {
      momenta[i] = grads[i].clone();
    } else if (options.momentum_type == "exponential_moving_average") {
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

  // The reference's sampled compression metrics (powersgd.md 1.4), every output.log_every_steps
  // steps instead of at random, on rank 0 with its own local tensors, over all parameters at once.
  bool sampling() const {
    return !sinks.empty() && config.output.log_every_steps > 0 && (step + 1) % config.output.log_every_steps == 0;
  }

  // After the step, outside the `batch` timer: the memory norm and the events, split "train".
  void emitCompressionSample(double epoch_position) {
    const auto& sample = exchange->sampledNorms();
    if (!sample) return;
    const double memory_norm = globalNorm(memories);
    auto emit = [&](const std::string& name, double value) {
      for (auto& sink : sinks) sink->metric({name, value, "train", epoch_position, step, bits});
    };
    emit("grad_norm", sample->gradient);
    emit("memory_norm", memory_norm);
    if (sample->send > 0) emit("rel_compression_error", memory_norm / sample->send);
  }

  static double globalNorm(const std::vector<at::Tensor>& tensors) {
    if (tensors.empty()) return 0;
    std::vector<at::Tensor> norms;
    for (const auto& t : tensors) norms.push_back(t.norm().to(at::kDouble));
    return at::stack(norms).norm().item<double>();
  }

  // batch.backward includes what the hooks do during backward (preparing sends, starting the
  // reducer's collectives); batch.reduce is what is left of the reduce after it.
  void trainStep(const tasks::Batch& batch, double epoch, tasks::MetricSums& train_sums, double& loss_sum) {
    auto batch_scope = timer.scope("batch");
    at::Tensor loss;
    {
      auto scope = timer.scope("batch.forward");
      loss = task.trainLoss(batch, train_sums);
    }
    {
      auto scope = timer.scope("batch.backward");
      exchange->startStep(sampling());
      loss.backward();
    }
    const double loss_value = loss.item<double>();
    loss_sum += loss_value;
    if (!std::isfinite(loss_value)) throw TrainingDiverged(divergedAt("the loss is " + std::to_string(loss_value)));
    torch::NoGradGuard no_grad;
    const auto& options = config.optimizer;
    {
      auto scope = timer.scope("batch.reduce");
      try {
        bits += exchange->reduce();
      } catch (const NonFiniteGradient& e) {
        throw TrainingDiverged(divergedAt(e.what()));
      }
    }
    if (!options.wd_before_reduce) {
      auto scope = timer.scope("batch.wd");
      for (size_t i = 0; i < params.size(); ++i) addWeightDecay(i);
    }
    if (!options.mom_before_reduce) {
      auto scope = timer.scope("batch.mom");
      for (size_t i = 0; i < params.size(); ++i) applyMomentum(i);
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
      for (const auto& split : task.evaluationSplits()) {
        auto metrics = reduceMetrics(task.evaluate(shard, split), task, comm, device());
        (split == "validation" ? summary.validation : summary.test) = std::move(metrics);
      }
    }
    summary.epoch = epoch + 1;
    summary.step = step;
    summary.bits = bits;
    summary.elapsed_s = secondsSince(start);
    summary.learning_rate = learningRate(config.optimizer, config.optimizer.learning_rate, comm.size(),
                                         epoch_position);
    result.last_train = summary.train;
    result.last_test = summary.test;
    result.last_validation = summary.validation;
    if (sinks.empty()) return;
    auto emit = [&](const std::string& name, double value, const std::string& split) {
      for (auto& sink : sinks) sink->metric({name, value, split, epoch_position, step, bits});
    };
    for (const auto& kv : summary.train) emit(kv.first, kv.second, "train");
    for (const auto& kv : summary.validation) emit(kv.first, kv.second, "validation");
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

  std::string divergedAt(const std::string& what) const {
    const std::string kept = checkpoints && checkpoints->lastStep() >= 0
                                 ? "the checkpoint of step " + std::to_string(checkpoints->lastStep()) + " is kept"
                                 : "no checkpoint was written";
    return "step " + std::to_string(step + 1) + ": " + what + "; stopping (" + kept + ")";
  }

  // One all-reduce of a flag, so that every rank stops at the same step.
  bool stopRequested() {
    if (!stop_requested) return false;
    auto flag = torch::full({1}, stop_requested() ? 1.0f : 0.0f, torch::TensorOptions().device(device()));
    comm.allreduceSum(flag);
    return flag.item<float>() > 0;
  }

  TensorMap snapshot() {
    TensorMap state;
    for (const auto& item : task.model().named_parameters()) state["param/" + item.key()] = item.value();
    for (const auto& item : task.model().named_buffers()) state["buffer/" + item.key()] = item.value();
    for (size_t i = 0; i < params.size(); ++i) {
      state["memory/" + names[i]] = memories[i];
      if (momenta[i].defined()) state["momentum/" + names[i]] = momenta[i];
    }
    reducers::Reducer::State reducer_state;
    reducer.saveState(reducer_state);
    for (const auto& kv : reducer_state) state["reducer/" + kv.first] = kv.second;
    tasks::Task::State task_state;
    task.saveState(task_state);
    for (const auto& kv : task_state) state["task/" + kv.first] = kv.second;
    const auto integer = [](int64_t v) { return torch::scalar_tensor(v, torch::kInt64); };
    const auto real = [](double v) { return torch::scalar_tensor(v, torch::kFloat64); };
    state["counter/step"] = integer(step);
    state["counter/epoch"] = integer(epoch);
    state["counter/batch"] = integer(batch_index);
    state["counter/bits"] = integer(static_cast<int64_t>(bits));
    state["counter/loss_sum"] = real(loss_sum);
    state["counter/elapsed_s"] = real(secondsSince(start));
    state["train_sums/.weight"] = real(train_sums.weight);
    for (const auto& kv : train_sums.sums) state["train_sums/" + kv.first] = real(kv.second);
    return state;
  }

  void save() {
    if (checkpoints) checkpoints->save(step, snapshot());
  }

  static at::Tensor entry(const TensorMap& state, const std::string& name) {
    const auto found = state.find(name);
    if (found == state.end()) throw UserError("checkpoint entry '" + name + "' is missing");
    return found->second;
  }

  static void copyInto(const at::Tensor& target, const at::Tensor& saved, const std::string& name) {
    if (!saved.sizes().equals(target.sizes()) || saved.scalar_type() != target.scalar_type()) {
      throw UserError("checkpoint entry '" + name + "' is " + toString(saved) + ", this run's is " + toString(target) +
                      " (a different model or setting)");
    }
    target.detach().copy_(saved);
  }

  static std::string toString(const at::Tensor& t) {
    std::string shape;
    for (auto size : t.sizes()) shape += (shape.empty() ? "" : ", ") + std::to_string(size);
    return std::string(c10::toString(t.scalar_type())) + " [" + shape + "]";
  }

  void restore(const TensorMap& state) {
    torch::NoGradGuard no_grad;
    for (const auto& item : task.model().named_parameters()) {
      copyInto(item.value(), entry(state, "param/" + item.key()), "param/" + item.key());
    }
    for (const auto& item : task.model().named_buffers()) {
      copyInto(item.value(), entry(state, "buffer/" + item.key()), "buffer/" + item.key());
    }
    reducers::Reducer::State reducer_state;
    for (size_t i = 0; i < params.size(); ++i) {
      copyInto(memories[i], entry(state, "memory/" + names[i]), "memory/" + names[i]);
      const auto momentum = state.find("momentum/" + names[i]);
      if (momentum == state.end()) continue;
      momenta[i] = torch::empty_like(params[i]);
      copyInto(momenta[i], momentum->second, momentum->first);
    }
    for (const auto& kv : state) {
      if (kv.first.rfind("reducer/", 0) == 0) reducer_state[kv.first.substr(8)] = kv.second;
    }
    try {
      reducer.loadState(reducer_state);
    } catch (const std::invalid_argument& e) {
      throw UserError(std::string("checkpoint: ") + e.what());
    }
    step = entry(state, "counter/step").item<int64_t>();
    epoch = entry(state, "counter/epoch").item<int64_t>();
    batch_index = entry(state, "counter/batch").item<int64_t>();
    bits = static_cast<uint64_t>(entry(state, "counter/bits").item<int64_t>());
    loss_sum = entry(state, "counter/loss_sum").item<double>();
    start = std::chrono::steady_clock::now() -
            std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                std::chrono::duration<double>(entry(state, "counter/elapsed_s").item<double>()));
    train_sums = {};
    for (const auto& kv : state) {
      if (kv.first.rfind("train_sums/", 0) != 0) continue;
      const std::string metric = kv.first.substr(11);
      if (metric == ".weight") {
        train_sums.weight = kv.second.item<double>();
      } else {
        train_sums.sums[metric] = kv.second.item<double>();
      }
    }
    resumed_task_state.reset();
    if (batch_index > 0) {
      resumed_task_state.emplace();
      for (const auto& kv : state) {
        if (kv.first.rfind("task/", 0) == 0) (*resumed_task_state)[kv.first.substr(5)] = kv.second;
      }
    }
    if (batch_index > batches_per_epoch) {
      throw UserError("checkpoint: it stopped at batch " + std::to_string(batch_index) + " of an epoch of " +
                      std::to_string(batches_per_epoch) + " (a different batch size or world size)");
    }
  }
};

Trainer::Trainer(const ExperimentConfig& config, tasks::Task& task, reducers::Communicator& comm,
                 reducers::Reducer& reducer, outputs::Timer& timer,
                 std::vector<std::unique_ptr<outputs::MetricSink>>& sinks)
    : state_(std::make_unique<State>(config, task, comm, reducer, timer, sinks)) {}

Trainer::~Trainer() = default;

void Trainer::setCheckpoints(CheckpointStore* store) { state_->checkpoints = store; }

void Trainer::resumeFrom(const TensorMap& state, const std::string& source) {
  state_->setUp();
  try {
    state_->restore(state);
  } catch (const UserError& e) {
    throw UserError(source + ": " + e.what());
  }
}

void Trainer::setStopRequest(std::function<bool()> requested) { state_->stop_requested = std::move(requested); }

TrainingResult Trainer::run() {
  State& s = *state_;
  s.setUp();
  TrainingResult result;
  const auto& training = s.config.training;
  const auto& checkpoint = s.config.checkpoint;
  const int64_t samples_per_step = training.batch_size * s.comm.size();
  for (int64_t epoch = s.epoch; epoch < training.epochs && s.step < s.total_steps; ++epoch) {
    s.epoch = epoch;
    auto batches = s.task.trainBatches(s.shard, epoch);
    if (s.batch_index == 0) {
      s.train_sums = {};
      s.loss_sum = 0;
    }
    // A resumed epoch continues the same data order at the batch it stopped before.
    for (int64_t skipped = 0; skipped < s.batch_index; ++skipped) batches->next();
    if (s.resumed_task_state) {
      try {
        s.task.loadState(*s.resumed_task_state);
      } catch (const std::invalid_argument& e) {
        throw UserError(std::string("checkpoint: ") + e.what());
      }
      s.resumed_task_state.reset();
    }
    bool checkpoint_due = false;
    while (s.step < s.total_steps) {
      auto batch = batches->next();
      if (!batch) break;
      const double position = epoch + static_cast<double>(s.batch_index) / s.batches_per_epoch;
      s.trainStep(*batch, position, s.train_sums, s.loss_sum);
      ++s.step;
      ++s.batch_index;
      s.emitCompressionSample(position);
      const double elapsed = secondsSince(s.start);
      s.report({s.step, s.total_steps, epoch + 1, training.epochs, s.loss_sum / s.batch_index,
                s.step * samples_per_step / std::max(elapsed, 1e-9), elapsed});
      if (s.stopRequested()) {
        result.stopped = true;
        break;
      }
      // A checkpoint that falls on the epoch's last batch waits for the epoch's evaluation.
      if (checkpoint.every_steps > 0 && s.step % checkpoint.every_steps == 0 && s.step < s.total_steps) {
        if (s.batch_index < s.batches_per_epoch) {
          s.save();
        } else {
          checkpoint_due = true;
        }
      }
    }
    if (result.stopped) break;
    const double position = epoch + static_cast<double>(s.batch_index) / s.batches_per_epoch;
    s.endEpoch(epoch, position, s.train_sums, result);
    if (s.batch_index >= s.batches_per_epoch) {
      s.epoch = epoch + 1;
      s.batch_index = 0;
      checkpoint_due |= checkpoint.every_epochs > 0 && s.epoch % checkpoint.every_epochs == 0;
    }
    if (checkpoint_due && s.step < s.total_steps) s.save();
  }
  s.save();
  result.epochs = s.epoch + static_cast<double>(s.batch_index) / s.batches_per_epoch;
  result.steps = s.step;
  result.bits = s.bits;
  return result;
}

}  // namespace gcrun::experiments
