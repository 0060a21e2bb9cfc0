#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

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

// The summary as events at fractional epoch `position` (every metric by split, time_per_batch,
// learning_rate and elapsed_s, split train), then each sink's epochEnd().
void reportEpoch(const std::vector<std::unique_ptr<outputs::MetricSink>>& sinks, const outputs::EpochSummary& summary,
                 const outputs::Timer& timer, double position);

}  // namespace gcrun::experiments
