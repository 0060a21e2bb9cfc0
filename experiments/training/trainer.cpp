#include "experiments/training/trainer.h"

#include <chrono>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <utility>

#include <torch/torch.h>

#include "experiments/training/gradient_exchange.h"
#include "experiments/training/lr_schedule.h"
#include "experiments/training/optimizer.h"
#include "experiments/training/training_state.h"
#include "experiments/training/worker_metrics.h"
#include "hyperparams/base/errors.h"

namespace gcrun::experiments {
namespace {

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<std::string> parameterNames(torch::nn::Module& model) {
  std::vector<std::string> names;
  for (const auto& item : model.named_parameters()) names.push_back(item.key());
  return names;
}

// A phase of the step, timed by the timer (timer_summary.json) and traced (output.trace) alike.
struct PhaseScope {
  outputs::Timer::Scope timed;
  trace::WorkerTrace::Span traced;
};

int64_t totalStepsOf(const TrainingOptions& training, int64_t batches_per_epoch) {
  const int64_t steps = training.epochs * batches_per_epoch;
  return training.max_steps > 0 ? std::min(steps, training.max_steps) : steps;
}

}  // namespace

struct Trainer::State : TrainerDeps {
  explicit State(TrainerDeps deps)
      : TrainerDeps(std::move(deps)),
        params(task.model().parameters()),
        names(parameterNames(task.model())),
        buffers(params),
        optimizer(config.optimizer, params, names, buffers.gradients),
        lossless(lossless_reducer),
        exchange(params, names, buffers, reducer,
                 GradientExchange::Options{config.optimizer.memory, task.localGradientClipNorm(), lossless},
                 [this](size_t i) {
                   if (config.optimizer.wd_before_reduce) optimizer.addWeightDecay(i);
                   if (config.optimizer.mom_before_reduce) optimizer.applyMomentum(i);
                 }),
        shard{comm.rank(), comm.size()},
        batches_per_epoch(tasks::batchesPerEpochOf(task, shard, config.training.batch_size)),
        total_steps(totalStepsOf(config.training, batches_per_epoch)) {}

  std::vector<at::Tensor> params;
  std::vector<std::string> names;  // the parameters', in order
  // Made before the optimizer and the exchange, which both work on them.
  GradientBuffers buffers;
  Optimizer optimizer;
  bool lossless;  // the reducer delivers the exact average
  GradientExchange exchange;
  tasks::Shard shard;
  int64_t batches_per_epoch;
  int64_t total_steps;
  LoopPosition at;  // at.elapsed_s is updated for checkpoints; `start` times the run
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  // A mid-epoch checkpoint's task state, loaded once its epoch's batches are set up again.
  std::optional<tasks::Task::State> resumed_task_state;

  TrainingParts parts() { return {task, reducer, names, buffers.memories, optimizer.momenta()}; }

  double position() const { return at.epoch + static_cast<double>(at.batch_index) / batches_per_epoch; }
  bool done() const { return at.epoch >= config.training.epochs || at.step >= total_steps; }

  void emit(const std::string& name, double value, double epoch_position, int64_t window = 0) {
    for (auto& sink : sinks) sink->metric({name, value, "train", epoch_position, at.step, at.bits, window});
  }

  // The reference's sampled compression metrics (powersgd.md 1.4), every output.log_every_steps
  // steps instead of at random, on rank 0 with its own local tensors, over all parameters at once.
  bool sampling() const {
    return !sinks.empty() && config.output.log_every_steps > 0 && (at.step + 1) % config.output.log_every_steps == 0;
  }
  // The same, parameter by parameter, every output.layer_stats_every_steps steps.
  bool layerStatsDue() const {
    const int64_t every = config.output.layer_stats_every_steps;
    return !sinks.empty() && every > 0 && (at.step + 1) % every == 0;
  }
  // What the step about to run samples.
  bool sample_metrics = false, sample_layers = false;

  // After the step, outside the `batch` timer: the memory norm and the events, split "train", at
  // the step's start. A lossless reducer's memory is always zero, and without error feedback no
  // memory is kept: those are not logged.
  void emitCompressionSample(double step_position) {
    const auto& sample = exchange.sampledNorms();
    if (!sample || !sample_metrics) return;
    emit("grad_norm", sample->gradient, step_position);
    if (lossless) return;
    const double memory_norm = globalNorm(buffers.memories);
    if (config.optimizer.memory) emit("memory_norm", memory_norm, step_position);
    if (sample->send > 0) emit("rel_compression_error", memory_norm / sample->send, step_position);
  }

  // After a sampled step, outside the `batch` timer (timed as layer_stats): a row per parameter,
  // its memory measured after the reduce. A lossless reducer loses nothing: its error is 0.
  void writeLayerStats() {
    if (!sample_layers) return;
    auto scope = timer.scope("layer_stats");
    const auto norms = exchange.sampledLayerNorms();
    std::vector<double> lost(params.size(), 0.0);
    if (!lossless) {
      std::vector<at::Tensor> memory_norms;
      for (const auto& m : buffers.memories) memory_norms.push_back(m.norm());
      lost = doublesOf(memory_norms);
    }
    const auto costs = reducer.lastCosts();
    const bool known = costs.size() == params.size();
    std::vector<outputs::LayerStatsRow> rows;
    for (size_t i = 0; i < params.size(); ++i) {
      outputs::LayerStatsRow row;
      row.step = at.step;
      row.parameter = names[i];
      row.shape = params[i].sizes().vec();
      row.elements = params[i].numel();
      row.grad_norm = norms.gradient[i];
      if (norms.send[i] > 0) row.rel_compression_error = lost[i] / norms.send[i];
      if (known) {
        row.bits = costs[i].bits;
        if (costs[i].rank > 0) row.rank = costs[i].rank;
      }
      rows.push_back(std::move(row));
    }
    for (auto& sink : sinks) sink->layerStats(rows);
  }

  // Every output.log_every_steps steps, on every rank (one all-reduce): the training loss averaged
  // over the workers and the steps since the last log, and the learning rate of the last step.
  void logWindow(double step_position) {
    if (config.output.log_every_steps <= 0 || at.step % config.output.log_every_steps != 0) return;
    auto total = torch::full({1}, at.window_loss, torch::TensorOptions().dtype(torch::kFloat64).device(comm.device()));
    comm.allreduceSum(total);
    const int64_t window = std::exchange(at.window_steps, 0);
    at.window_loss = 0;
    emit(task.lossName(), total.cpu().item<double>() / static_cast<double>(comm.size() * window), position(), window);
    const auto& o = config.optimizer;
    emit("learning_rate", learningRate(o, o.learning_rate, comm.size(), step_position), position(), window);
  }

  // The reference's step: forward, backward (whose hooks prepare the sends and start the reducer's
  // collectives), the rest of the reduce (batch.reduce), weight decay and momentum unless they came
  // before the reduce, and the learning-rate step.
  void trainStep(const tasks::Batch& batch) {
    trace.setStep(at.step + 1);
    auto batch_scope = phase("batch", "batch");
    at::Tensor loss;
    {
      auto turn = role.turn();
      {
        auto scope = phase("batch.forward", "forward");
        loss = task.trainLoss(batch, at.train_sums);
      }
      auto scope = phase("batch.backward", "backward");
      sample_metrics = sampling();
      sample_layers = layerStatsDue();
      exchange.startStep(sample_metrics || sample_layers);
      loss.backward();
    }
    const double loss_value = loss.item<double>();
    at.loss_sum += loss_value;
    at.window_loss += loss_value;
    ++at.window_steps;
    if (!std::isfinite(loss_value)) throw TrainingDiverged(divergedAt("the loss is " + std::to_string(loss_value)));
    torch::NoGradGuard no_grad;
    {
      PhaseScope scope{timer.scope("batch.reduce"), trace.reduce()};
      try {
        at.bits += exchange.reduce();
      } catch (const NonFiniteGradient& e) {
        throw TrainingDiverged(divergedAt(e.what()));
      }
    }
    auto optimizer_span = trace.span("optimizer");
    role.update(at.step + 1, [&] {
      if (!config.optimizer.wd_before_reduce) {
        auto scope = timer.scope("batch.wd");
        for (size_t i = 0; i < optimizer.size(); ++i) optimizer.addWeightDecay(i);
      }
      if (!config.optimizer.mom_before_reduce) {
        auto scope = timer.scope("batch.mom");
        for (size_t i = 0; i < optimizer.size(); ++i) optimizer.applyMomentum(i);
      }
      auto scope = timer.scope("batch.step");
      optimizer.step(comm.size(), position());
    });
  }

  PhaseScope phase(const char* timer_label, const char* span_name) {
    return {timer.scope(timer_label), trace.span(span_name)};
  }

  // The epoch's metrics, evaluated every evaluation.every_epochs epochs and at the run's end; false
  // when a stop request cut the evaluation short (its partial sums are dropped).
  bool endEpoch(TrainingResult& result) {
    const bool last =
        at.batch_index < batches_per_epoch || at.step >= total_steps || at.epoch + 1 >= config.training.epochs;
    const bool evaluate = last || (at.epoch + 1) % config.evaluation.every_epochs == 0;
    const tasks::EvaluationLimits limits{config.evaluation.max_samples, stop_requested};
    trace.setStep(at.step);
    auto evaluated = [&] {
      auto span = trace.span("evaluation", evaluate);
      return summarizeEpoch(task, comm, shard, at.train_sums, timer, evaluate ? &limits : nullptr, role);
    }();
    if (!evaluated) return false;
    auto& summary = *evaluated;
    summary.epoch = at.epoch + 1;
    summary.step = at.step;
    summary.bits = at.bits;
    summary.elapsed_s = secondsSince(start);
    summary.learning_rate = learningRate(config.optimizer, config.optimizer.learning_rate, comm.size(), position());
    result.last_train = summary.train;
    if (evaluate) {
      result.last_test = summary.test;
      result.last_validation = summary.validation;
    }
    reportEpoch(sinks, summary, timer, position());
    return true;
  }

  std::string divergedAt(const std::string& what) const {
    const std::string kept = checkpoints.lastStep() >= 0
                                 ? "the checkpoint of step " + std::to_string(checkpoints.lastStep()) + " is kept"
                                 : "no checkpoint was written";
    return "step " + std::to_string(at.step + 1) + ": " + what + "; stopping (" + kept + ")";
  }

  // One all-reduce of a flag: every rank stops at the same step.
  bool stopRequested() { return stop_requested && anyRank(stop_requested(), comm); }

  void save() {
    at.elapsed_s = secondsSince(start);
    checkpoints.save(at.step, snapshotTraining(parts(), at));
  }
};

Trainer::Trainer(TrainerDeps deps) : state_(std::make_unique<State>(std::move(deps))) {}

Trainer::~Trainer() = default;

void Trainer::resumeFrom(const LoadedCheckpoint& checkpoint) {
  State& s = *state_;
  try {
    s.at = restoreTraining(checkpoint.state, s.parts(), s.resumed_task_state);
    if (s.at.batch_index > s.batches_per_epoch) {
      throw UserError("checkpoint: it stopped at batch " + std::to_string(s.at.batch_index) + " of an epoch of " +
                      std::to_string(s.batches_per_epoch) + " (a different batch size or world size)");
    }
  } catch (const UserError& e) {
    throw UserError(checkpoint.file + ": " + e.what());
  }
  if (s.at.step != checkpoint.step) {
    throw UserError(checkpoint.manifest + ": step " + std::to_string(checkpoint.step) + ", but " + checkpoint.file +
                    " holds counter/step " + std::to_string(s.at.step));
  }
  s.start = std::chrono::steady_clock::now() - std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                   std::chrono::duration<double>(s.at.elapsed_s));
}

uint64_t Trainer::checkpointBytes() const { return bytesOf(expectedTraining(state_->parts())); }

bool Trainer::finished() const { return state_->done(); }

// The reference's train.py loop: epochs of steps, each epoch closed by its evaluation, with
// checkpoints at the configured steps and epochs, on a stop request and at the end.
TrainingResult Trainer::run() {
  State& s = *state_;
  TrainingResult result;
  auto& at = s.at;
  const auto& training = s.config.training;
  const auto& checkpoint = s.config.checkpoint;
  const int64_t samples_per_step = training.batch_size * s.comm.size();
  while (!s.done()) {
    if (at.batch_index == 0) {
      at.train_sums = {};
      at.loss_sum = 0;
    }
    auto batches = batchesFrom(s.task, s.shard, at, s.resumed_task_state);
    bool checkpoint_due = false;
    while (at.step < s.total_steps) {
      auto batch = batches->next();
      if (!batch) break;
      const double step_position = s.position();
      s.trainStep(*batch);
      ++at.step;
      ++at.batch_index;
      s.emitCompressionSample(step_position);
      s.writeLayerStats();
      s.logWindow(step_position);
      const double elapsed = secondsSince(s.start);
      for (auto& sink : s.sinks) {
        sink->progress({at.step, s.total_steps, at.epoch + 1, training.epochs, at.loss_sum / at.batch_index,
                        at.step * samples_per_step / std::max(elapsed, 1e-9), elapsed});
      }
      if (s.stopRequested()) {
        result.stopped = true;
        break;
      }
      // A checkpoint that falls on the epoch's last batch waits for the epoch's evaluation.
      if (checkpoint.every_steps > 0 && at.step % checkpoint.every_steps == 0 && at.step < s.total_steps) {
        if (at.batch_index < s.batches_per_epoch) {
          s.save();
        } else {
          checkpoint_due = true;
        }
      }
    }
    if (result.stopped) break;
    // Stopped during the evaluation, the checkpoint is of the epoch's last step: a resume evaluates.
    if (!s.endEpoch(result)) {
      result.stopped = true;
      break;
    }
    if (at.batch_index < s.batches_per_epoch) break;  // max_steps ended it mid-epoch
    ++at.epoch;
    at.batch_index = 0;
    checkpoint_due |= checkpoint.every_epochs > 0 && at.epoch % checkpoint.every_epochs == 0;
    if (checkpoint_due && at.step < s.total_steps) s.save();
  }
  s.save();
  result.epochs = s.position();
  result.steps = at.step;
  result.bits = at.bits;
  return result;
}

}  // namespace gcrun::experiments
