#include "experiments/training/trainer.h"

#include <chrono>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <utility>

#include <c10/util/hash.h>
#include <torch/torch.h>

#include "experiments/optimizers/optimizer.h"
#include "experiments/training/step_instruments.h"
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

Phase phaseOf(StepPart part) {
  switch (part) {
    case StepPart::weight_decay:
      return Phase::weight_decay;
    case StepPart::momentum:
      return Phase::momentum;
    case StepPart::update:
      return Phase::optimizer_step;
  }
  return Phase::optimizer_step;
}

// A tensor's dtype, shape and bytes, as a SHA-1 in hex: what ranks compare instead of the bytes.
std::string digestOf(const at::Tensor& tensor) {
  const at::Tensor bytes = tensor.detach().cpu().contiguous();
  std::string described = std::string(c10::toString(bytes.scalar_type())) + c10::str(bytes.sizes()) + ":";
  described.append(static_cast<const char*>(bytes.data_ptr()), bytes.nbytes());
  return c10::sha1(described).str();
}

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
        shard{comm.rank(), comm.size()},
        total_steps(totalStepsOf(config.training, batches_per_epoch)),
        optimizer(optimizer_spec.make(OptimizerContext{config.optimizer, params, names, buffers.gradients,
                                                       task.embeddingParameters(), comm.size(), total_steps})),
        sync(sync_spec.make(SyncContext{config, sync_comm, reducer, lossless_reducer, task.localGradientClipNorm(),
                                        params, names, buffers, [this](size_t i) { optimizer->beforeSend(i); },
                                        make_reducer, make_reducer_over})),
        instruments(timer, trace) {}

  std::vector<at::Tensor> params;
  std::vector<std::string> names;  // the parameters', in order
  // Made before the optimizer and the synchronizer, which both work on them.
  GradientBuffers buffers;
  tasks::Shard shard;
  int64_t total_steps;
  std::unique_ptr<Optimizer> optimizer;  // optimizer.name's
  std::unique_ptr<Synchronizer> sync;
  LoopPosition at;  // at.elapsed_s is updated for checkpoints; `start` times the run
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  // A mid-epoch checkpoint's task state, loaded once its epoch's batches are set up again.
  std::optional<tasks::Task::State> resumed_task_state;
  StepInstruments instruments;

  TrainingParts parts() const { return {task, *sync, *optimizer}; }

  double position() const { return at.epoch + static_cast<double>(at.batch_index) / batches_per_epoch; }
  bool done() const { return at.epoch >= config.training.epochs || at.step >= total_steps; }

  // The reference's step: forward and backward (whose hooks may start the sync), the
  // synchronizer's after-backward, the optimizer, the synchronizer's after-step.
  void trainStep(const tasks::Batch& batch, StepSampler& sampler) {
    instruments.setStep(at.step + 1);
    auto batch_scope = instruments.phase(Phase::batch);
    const double loss = forwardBackward(batch, sampler.due(at.step + 1));
    at.loss_sum += loss;
    at.window_loss += loss;
    ++at.window_steps;
    if (!std::isfinite(loss)) throw TrainingDiverged(divergedAt("the loss is " + std::to_string(loss)));
    torch::NoGradGuard no_grad;
    {
      auto scope = instruments.phase(Phase::reduce);
      at.bits += synced([&] { return sync->afterBackward(); });
    }
    {
      auto scope = instruments.phase(Phase::optimizer);
      role.update(at.step + 1, [&] { applyOptimizer(); });
    }
    {
      auto scope = instruments.phase(Phase::sync, sync_spec.local_replicas);
      at.bits += synced([&] { return sync->afterStep(at.step + 1); });
    }
    if (const auto event = sync->lastSync()) {
      ++at.syncs;
      at.sync_bits += event->bits;
    }
  }

  double forwardBackward(const tasks::Batch& batch, bool sample) {
    at::Tensor loss;
    {
      auto turn = role.turn();
      {
        auto scope = instruments.phase(Phase::forward);
        loss = task.trainLoss(batch, at.train_sums);
      }
      auto scope = instruments.phase(Phase::backward);
      sync->beforeBackward(sample);
      loss.backward();
    }
    return loss.item<double>();
  }

  // The optimizer's step after the reduce, its parts timed as the trainer's phases.
  void applyOptimizer() {
    optimizer->step({at.step, position()}, [this](StepPart part, const std::function<void()>& work) {
      auto scope = instruments.phase(phaseOf(part));
      work();
    });
  }

  // The bits a sync sent; a gradient that stopped being finite ends the run.
  uint64_t synced(const std::function<uint64_t()>& sync_part) {
    try {
      return sync_part();
    } catch (const NonFiniteGradient& e) {
      throw TrainingDiverged(divergedAt(e.what()));
    }
  }

  // The epoch's metrics reduced over the workers, evaluated when `evaluate`, on the model the
  // synchronizer says; nullopt when a stop request cut the evaluation short.
  std::optional<outputs::EpochSummary> summarize(bool evaluate) {
    const tasks::EvaluationLimits limits{config.evaluation.max_samples, stop_requested};
    instruments.setStep(at.step);
    auto span = instruments.phase(Phase::evaluation, evaluate);
    std::optional<outputs::EvaluatedSplits> replica;
    if (evaluate && sync_spec.local_replicas) {
      replica = evaluateRankZeroModel(task, comm, shard, limits, role, timer, params);
      if (!replica) return std::nullopt;
    }
    sync->beforeEvaluation();
    auto summary = summarizeEpoch(task, comm, shard, at.train_sums, timer, evaluate ? &limits : nullptr, role);
    sync->afterEvaluation();
    if (summary && replica) summary->replica = std::move(*replica);
    if (summary) checkEvaluated(*summary);
    return summary;
  }

  // An evaluated metric that is nan or inf means the evaluated model diverged (a global model
  // that an outer step overflowed, say): the run stops as at a non-finite loss, every rank alike
  // (the metrics are reduced), rather than completing with null metrics.
  void checkEvaluated(const outputs::EpochSummary& summary) const {
    if (const auto problem = nonFiniteMetric(summary)) {
      throw TrainingDiverged(diverged(at.step, *problem + " after it"));
    }
  }

  std::string divergedAt(const std::string& what) const { return diverged(at.step + 1, what); }

  std::string diverged(int64_t step, const std::string& what) const {
    const std::string kept = checkpoints.lastStep() >= 0
                                 ? "the checkpoint of step " + std::to_string(checkpoints.lastStep()) + " is kept"
                                 : "no checkpoint was written";
    return "step " + std::to_string(step) + ": " + what + "; stopping (" + kept + ")";
  }

  // One all-reduce of a flag: every rank stops at the same step.
  bool stopRequested() { return stop_requested && anyRank(stop_requested(), comm); }

  void save() {
    at.elapsed_s = secondsSince(start);
    checkpoints.save(
        at.step, [this] { return snapshotTraining(parts(), at); }, [this] { return role.turn(); });
  }
};

// The reference's train.py loop over the trainer's state: epochs of steps, each epoch closed by
// its evaluation, with checkpoints at the configured steps and epochs, on a stop request and at
// the end; rank 0 reports each step and epoch to the outputs.
class Trainer::Loop {
 public:
  Loop(State& state, const TrainerOutputs& outputs)
      : s_(state),
        at_(state.at),
        sinks_(outputs.sinks),
        events_(outputs.sinks),
        sampler_(state.config.output, outputs.sinks, state.names, state.params) {}

  TrainingResult run() {
    while (!s_.done()) {
      if (at_.batch_index == 0) {
        at_.train_sums = {};
        at_.loss_sum = 0;
      }
      bool checkpoint_due = runSteps();
      if (result_.stopped) break;
      // Stopped during the evaluation, the checkpoint is of the epoch's last step: a resume evaluates.
      if (!endEpoch()) {
        result_.stopped = true;
        break;
      }
      if (at_.batch_index < s_.batches_per_epoch) break;  // max_steps ended it mid-epoch
      ++at_.epoch;
      at_.batch_index = 0;
      const int64_t every_epochs = s_.config.checkpoint.every_epochs;
      checkpoint_due |= every_epochs > 0 && at_.epoch % every_epochs == 0;
      if (checkpoint_due && at_.step < s_.total_steps) s_.save();
    }
    s_.save();
    result_.epochs = s_.position();
    result_.steps = at_.step;
    result_.bits = at_.bits;
    result_.syncs = at_.syncs;
    result_.sync_bits = at_.sync_bits;
    return result_;
  }

 private:
  // The epoch's steps from its current batch, until its end, max_steps or a stop request. Returns
  // whether a checkpoint falls on the epoch's last batch: it waits for the epoch's evaluation.
  bool runSteps() {
    auto batches = batchesFrom(s_.task, s_.shard, at_, s_.resumed_task_state);
    const int64_t every_steps = s_.config.checkpoint.every_steps;
    bool checkpoint_due = false;
    while (at_.step < s_.total_steps) {
      auto batch = batches->next();
      if (!batch) break;
      const double step_position = s_.position();
      s_.trainStep(*batch, sampler_);
      ++at_.step;
      ++at_.batch_index;
      reportStep(step_position);
      if (evaluationDueWithin() && !evaluateWithinEpoch()) {
        result_.stopped = true;
        break;
      }
      if (s_.stopRequested()) {
        result_.stopped = true;
        break;
      }
      if (every_steps > 0 && at_.step % every_steps == 0 && at_.step < s_.total_steps) {
        if (at_.batch_index < s_.batches_per_epoch) {
          s_.save();
        } else {
          checkpoint_due = true;
        }
      }
    }
    return checkpoint_due;
  }

  // After the step, outside the `batch` timer: its samples, its sync, the log window and the
  // progress line.
  void reportStep(double step_position) {
    events_.at(at_.step, at_.bits);
    sampler_.report(
        *s_.sync, at_.step, step_position,
        [&](const std::string& name, double value, double at) { events_.train(name, value, at); }, s_.instruments);
    events_.sync(s_.sync->lastSync(), s_.position());
    logWindow(step_position);
    const double elapsed = secondsSince(s_.start);
    const auto& training = s_.config.training;
    const int64_t samples_per_step = training.batch_size * s_.comm.size();
    events_.progress({at_.step, s_.total_steps, at_.epoch + 1, training.epochs, at_.loss_sum / at_.batch_index,
                      at_.step * samples_per_step / std::max(elapsed, 1e-9), elapsed});
  }

  // Every output.log_every_steps steps, on every rank (one all-reduce): the training loss averaged
  // over the workers and the steps since the last log, and the learning rate of the last step.
  void logWindow(double step_position) {
    const int64_t every = s_.config.output.log_every_steps;
    if (every <= 0 || at_.step % every != 0) return;
    const int64_t window = std::exchange(at_.window_steps, 0);
    const double loss = meanWindowLoss(std::exchange(at_.window_loss, 0.0), window, s_.comm);
    events_.train(s_.task.lossName(), loss, s_.position(), window);
    // The rate of the step just done: its index is one below the steps counted.
    events_.train("learning_rate", s_.optimizer->learningRate({at_.step - 1, step_position}), s_.position(), window);
  }

  // evaluation.every_steps falls on the step just done, and it is not the epoch's last (whose
  // evaluation endEpoch() decides).
  bool evaluationDueWithin() const {
    const int64_t every = s_.config.evaluation.every_steps;
    return every > 0 && at_.step % every == 0 && at_.batch_index < s_.batches_per_epoch && at_.step < s_.total_steps;
  }

  // An evaluation within the epoch: validation and test (and rank 0's replica) at the step just
  // done, with the time trained so far; false when a stop request cut it short.
  bool evaluateWithinEpoch() {
    auto evaluated = s_.summarize(true);
    if (!evaluated) return false;
    events_.evaluation(*evaluated, s_.position(), secondsSince(s_.start));
    return true;
  }

  // The epoch's metrics, evaluated every evaluation.every_epochs epochs and at the run's end; false
  // when a stop request cut the evaluation short (its partial sums are dropped).
  bool endEpoch() {
    const auto& config = s_.config;
    const bool last =
        at_.batch_index < s_.batches_per_epoch || at_.step >= s_.total_steps || at_.epoch + 1 >= config.training.epochs;
    const bool evaluate = last || (at_.epoch + 1) % config.evaluation.every_epochs == 0;
    auto evaluated = s_.summarize(evaluate);
    if (!evaluated) return false;
    auto& summary = *evaluated;
    summary.epoch = at_.epoch + 1;
    summary.step = at_.step;
    summary.bits = at_.bits;
    summary.elapsed_s = secondsSince(s_.start);
    summary.learning_rate = s_.optimizer->learningRate({at_.step, s_.position()});  // the next step's
    result_.last_train = summary.train;
    if (evaluate) {
      result_.last_test = summary.test;
      result_.last_validation = summary.validation;
    }
    reportEpoch(sinks_, summary, s_.timer, s_.position());
    return true;
  }

  State& s_;
  LoopPosition& at_;
  const std::vector<std::unique_ptr<outputs::MetricSink>>& sinks_;
  TrainingEvents events_;
  StepSampler sampler_;
  TrainingResult result_;
};

Trainer::Trainer(TrainerDeps deps) : state_(std::make_unique<State>(std::move(deps))) {}

Trainer::~Trainer() = default;

void Trainer::resumeFrom(const LoadedCheckpoint& checkpoint) {
  State& s = *state_;
  try {
    s.at = restoreTraining(checkpoint.state, s.parts(), s.batches_per_epoch, s.resumed_task_state);
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

comm::NamedValues Trainer::sharedState() const {
  const State& s = *state_;
  const bool one_model = !s.sync_spec.local_replicas;
  comm::NamedValues shared;
  for (const auto& [name, tensor] : snapshotTraining(s.parts(), s.at)) {
    const bool position = name == "counter/step" || name == "counter/epoch" || name == "counter/batch";
    if (position || (one_model && name.rfind("param/", 0) == 0) || s.sync->sharedEntry(name)) {
      shared.emplace_back(name, digestOf(tensor));
    }
  }
  return shared;
}

uint64_t Trainer::checkpointBytes() const { return bytesOf(expectedTraining(state_->parts())); }

bool Trainer::finished() const { return state_->done(); }

TrainingResult Trainer::run(const TrainerOutputs& outputs) { return Loop(*state_, outputs).run(); }

}  // namespace gcrun::experiments
