#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "experiments/sync/synchronizer.h"
#include "experiments/training/worker_role.h"
#include "outputs/metric_sink.h"
#include "outputs/timer.h"
#include "reducers/comm/communicator.h"
#include "tasks/task.h"

namespace gcrun::experiments {

// Adds up every worker's metric sums (one all-reduce) and returns the task's finalized means.
std::map<std::string, double> reduceMetrics(const tasks::MetricSums& local, const tasks::Task& task,
                                            comm::Communicator& comm);

// Whether `mine` is true on any rank (one all-reduce; every rank calls it).
bool anyRank(bool mine, comm::Communicator& comm);

// An epoch's metrics, reduced over the workers: its training sums, then, given `evaluation`, every
// evaluation split (timed as epoch_metrics.collect and test.last). When evaluation->stop is set,
// the ranks agree on it after evaluating (one all-reduce) and nullopt means one stopped. The
// evaluation holds the role's turn, and the collectives do not. The caller fills in the counters.
std::optional<outputs::EpochSummary> summarizeEpoch(tasks::Task& task, comm::Communicator& comm,
                                                    const tasks::Shard& shard, const tasks::MetricSums& train_sums,
                                                    outputs::Timer& timer, const tasks::EvaluationLimits* evaluation,
                                                    WorkerRole& role);

// The metrics of every evaluation split of the model the parameters hold, reduced over the workers;
// nullopt when evaluation.stop cut it short (agreed on as summarizeEpoch does).
std::optional<outputs::EvaluatedSplits> evaluateSplits(tasks::Task& task, comm::Communicator& comm,
                                                       const tasks::Shard& shard,
                                                       const tasks::EvaluationLimits& evaluation, WorkerRole& role);

// Rank 0's events of a run as it trains (the other ranks' sinks are empty), each at the step just
// done and the bits sent so far, which at() sets after every step.
class TrainingEvents {
 public:
  explicit TrainingEvents(const std::vector<std::unique_ptr<outputs::MetricSink>>& sinks) : sinks_(sinks) {}

  void at(int64_t step, uint64_t bits) {
    step_ = step;
    bits_ = bits;
  }
  // An event of split "train" at fractional epoch `position`; `window`: the steps it averages.
  void train(const std::string& name, double value, double position, int64_t window = 0) const;
  // The step's sync of models, if it made one: what it sent and how far the replicas had drifted.
  void sync(const std::optional<SyncEvent>& event, double position) const;
  void progress(const outputs::Progress& progress) const;
  // An evaluation within an epoch: validation and test (and rank 0's replica's), then the time
  // trained so far.
  void evaluation(const outputs::EpochSummary& evaluated, double position, double elapsed_s) const;

 private:
  const std::vector<std::unique_ptr<outputs::MetricSink>>& sinks_;
  int64_t step_ = 0;
  uint64_t bits_ = 0;
};

// The training loss of the last `window` steps averaged over them and the workers, from this
// worker's sum `window_loss` (one all-reduce; every rank calls it).
double meanWindowLoss(double window_loss, int64_t window, comm::Communicator& comm);

// Rank 0's own model `params`, which differs from the evaluated global one between syncs: every
// worker evaluates a copy broadcast from rank 0 (not counted as sent: no part of training), timed
// as replica.evaluation; nullopt when evaluation.stop cut it short.
std::optional<outputs::EvaluatedSplits> evaluateRankZeroModel(tasks::Task& task, comm::Communicator& comm,
                                                              const tasks::Shard& shard,
                                                              const tasks::EvaluationLimits& evaluation,
                                                              WorkerRole& role, outputs::Timer& timer,
                                                              const std::vector<at::Tensor>& params);

// "the evaluated <split> <metric> is nan" (or inf, -inf) for the first evaluated metric that is
// not finite (validation, test, then rank 0's replica's); nullopt when all are.
std::optional<std::string> nonFiniteMetric(const outputs::EpochSummary& summary);

// The summary as events at fractional epoch `position` (every metric by split, time_per_batch,
// learning_rate and elapsed_s, split train), then each sink's epochEnd().
void reportEpoch(const std::vector<std::unique_ptr<outputs::MetricSink>>& sinks, const outputs::EpochSummary& summary,
                 const outputs::Timer& timer, double position);

}  // namespace gcrun::experiments
