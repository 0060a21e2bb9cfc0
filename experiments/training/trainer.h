#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "experiments/optimizers/optimizer.h"
#include "experiments/sync/synchronizer.h"
#include "experiments/training/checkpoint.h"
#include "experiments/training/step_sampler.h"
#include "experiments/training/worker_role.h"
#include "hyperparams/config.h"
#include "outputs/metric_sink.h"
#include "outputs/timer.h"
#include "outputs/trace/recorder.h"
#include "reducers/comm/agreement.h"
#include "reducers/comm/communicator.h"
#include "reducers/reducer.h"
#include "tasks/task.h"

namespace gcrun::experiments {

struct TrainingResult {
  int64_t steps = 0;
  double epochs = 0;                         // fractional when training.max_steps stopped it mid-epoch
  uint64_t bits = 0;                         // sent by this worker, all steps
  int64_t syncs = 0;                         // syncs of the workers' models, all steps
  uint64_t sync_bits = 0;                    // sent by this worker in those syncs
  std::map<std::string, double> last_train;  // reduced over workers, last epoch
  std::map<std::string, double> last_test;
  std::map<std::string, double> last_validation;  // empty unless the task has a validation split
  bool stopped = false;                           // a stop request ended it after `steps` (its checkpoint is written)
};

// A loss or gradient that is no longer finite (nan, inf).
class TrainingDiverged : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a Trainer trains with, all of it owned by the worker's run (see worker_run.h) and complete
// when the trainer is built.
struct TrainerDeps {
  const ExperimentConfig& config;
  tasks::Task& task;
  int64_t batches_per_epoch;  // the task's for this worker's shard, checked (tasks::batchesPerEpochOf)
  comm::Communicator& comm;
  reducers::Reducer& reducer;
  // What the reducer and the sync strategy's own collectives go through: `comm`, or `comm` traced
  // when output.trace is on.
  comm::Communicator& sync_comm;
  bool lossless_reducer;  // the reducer's spec says it delivers the exact average
  // Another reducer as `reducer` was made, over sync_comm, for a strategy that reduces parts of the
  // model through reducers of their own (SyncContext::make_reducer).
  ReducerMaker make_reducer;
  // The same over another communicator (SyncContext::make_reducer_over).
  ReducerOverMaker make_reducer_over;
  // sync.strategy's: what keeps the workers' models in agreement.
  const SynchronizerSpec& sync_spec;
  // optimizer.name's: what steps along the synchronized gradients.
  const OptimizerSpec& optimizer_spec;
  outputs::Timer& timer;
  // Written every checkpoint.every_steps and every_epochs, at the end, and when the run is stopped.
  CheckpointStore& checkpoints;
  WorkerRole& role;
  // Polled after every step; when it returns true on any rank, every rank stops after that step.
  // Empty: nothing stops the run.
  std::function<bool()> stop_requested;
  // This worker's output.trace recording: the phases of the steps in its window.
  trace::WorkerTrace& trace;
};

// Where run() reports: rank 0's sinks, per-layer rows included (MetricSink::layerStats). Opened
// once a resume was agreed on, so that a refused resume leaves the run directory as it was.
struct TrainerOutputs {
  // Empty on all ranks but 0.
  const std::vector<std::unique_ptr<outputs::MetricSink>>& sinks;
};

// The reference's training loop (powersgd.md 1.3) for one worker. Every worker runs it in
// lockstep. Constructing it gives every parameter its gradient buffer and hooks backward.
class Trainer {
 public:
  explicit Trainer(TrainerDeps deps);
  ~Trainer();

  // Continue from a checkpoint that CheckpointStore::loadLatest() read, at the same step, epoch
  // and batch, so that the rest of the run is what the saved run would have done. Checked here,
  // before run(): an entry that does not fit this model and reducer is a UserError naming the rank
  // file and the entry, a step other than the manifest's one naming the manifest.
  void resumeFrom(const LoadedCheckpoint& checkpoint);
  // The bytes of the state a checkpoint of this run holds (expectedTraining), which bound the rank
  // file a resume reads.
  uint64_t checkpointBytes() const;

  // After resumeFrom(): what every rank's checkpoint must hold alike, as (entry, SHA-1 of its
  // bytes): the position's step, epoch and batch, the model where the strategy keeps one for all
  // workers, and the entries the synchronizer shares (Synchronizer::sharedEntry).
  comm::NamedValues sharedState() const;

  // Whether run() has nothing left to do (a resumed run already at its end).
  bool finished() const;

  // Throws TrainingDiverged naming the step (and parameter) when the loss or the reduced gradient
  // stops being finite.
  TrainingResult run(const TrainerOutputs& outputs);

 private:
  struct State;  // what persists between calls: the model's parts, the synchronizer, the position
  class Loop;    // one call of run(): its loop and what it reports
  std::unique_ptr<State> state_;
};

}  // namespace gcrun::experiments
