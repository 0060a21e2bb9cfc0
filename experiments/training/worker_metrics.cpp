#include "experiments/training/worker_metrics.h"

#include <cmath>

#include <torch/torch.h>

#include "experiments/sync/replicas.h"
#include "outputs/progress/progress_line.h"

namespace gcrun::experiments {
namespace {

// The evaluated splits' metrics (rank 0's replica's after them) as events at `step`.
void emitEvaluated(const std::vector<std::unique_ptr<outputs::MetricSink>>& sinks, const outputs::EpochSummary& summary,
                   double position, int64_t step, uint64_t bits) {
  const std::pair<const std::map<std::string, double>*, const char*> splits[] = {
      {&summary.validation, "validation"},
      {&summary.test, "test"},
      {&summary.replica.validation, "replica_validation"},
      {&summary.replica.test, "replica_test"}};
  for (const auto& [metrics, split] : splits) {
    for (const auto& [name, value] : *metrics) {
      for (auto& sink : sinks) sink->metric({name, value, split, position, step, bits});
    }
  }
}

// One split's evaluation; the rank-0 worker (one per run) shows its progress on a terminal.
tasks::MetricSums evaluateWithProgress(tasks::Task& task, const tasks::Shard& shard, const std::string& split,
                                       const tasks::EvaluationLimits& evaluation, bool shows_progress) {
  if (!shows_progress) return task.evaluate(shard, split, evaluation);
  outputs::ProgressLine line("evaluating " + split, 0, "batches");
  tasks::EvaluationLimits limits = evaluation;
  limits.progress = [&line](int64_t done, int64_t total) { line.update(done, total); };
  return task.evaluate(shard, split, limits);
}

}  // namespace

std::map<std::string, double> reduceMetrics(const tasks::MetricSums& local, const tasks::Task& task,
                                            comm::Communicator& comm) {
  std::vector<double> values{local.weight};
  for (const auto& kv : local.sums) values.push_back(kv.second);
  auto packed = torch::tensor(values, torch::kFloat64).to(comm.device());
  comm.allreduceSum(packed);
  packed = packed.cpu();
  tasks::MetricSums total;
  total.weight = packed[0].item<double>();
  size_t i = 1;
  for (const auto& kv : local.sums) total.sums[kv.first] = packed[i++].item<double>();
  return task.finalize(total.means());
}

bool anyRank(bool mine, comm::Communicator& comm) {
  auto flag = torch::full({1}, mine ? 1.0f : 0.0f, torch::TensorOptions().device(comm.device()));
  comm.allreduceSum(flag);
  return flag.item<float>() > 0;
}

std::optional<outputs::EpochSummary> summarizeEpoch(tasks::Task& task, comm::Communicator& comm,
                                                    const tasks::Shard& shard, const tasks::MetricSums& train_sums,
                                                    outputs::Timer& timer, const tasks::EvaluationLimits* evaluation,
                                                    WorkerRole& role) {
  outputs::EpochSummary summary;
  {
    auto scope = timer.scope("epoch_metrics.collect");
    summary.train = reduceMetrics(train_sums, task, comm);
  }
  if (!evaluation) return summary;
  auto scope = timer.scope("test.last");
  auto splits = evaluateSplits(task, comm, shard, *evaluation, role);
  if (!splits) return std::nullopt;
  summary.validation = std::move(splits->validation);
  summary.test = std::move(splits->test);
  return summary;
}

std::optional<outputs::EvaluatedSplits> evaluateSplits(tasks::Task& task, comm::Communicator& comm,
                                                       const tasks::Shard& shard,
                                                       const tasks::EvaluationLimits& evaluation, WorkerRole& role) {
  std::vector<tasks::MetricSums> local;
  {
    auto turn = role.turn();
    for (const auto& split : task.evaluationSplits()) {
      if (evaluation.stop && evaluation.stop()) break;
      local.push_back(evaluateWithProgress(task, shard, split, evaluation, comm.rank() == 0));
    }
  }
  if (evaluation.stop && anyRank(evaluation.stop(), comm)) return std::nullopt;
  outputs::EvaluatedSplits evaluated;
  const auto splits = task.evaluationSplits();
  for (size_t i = 0; i < splits.size(); ++i) {
    (splits[i] == "validation" ? evaluated.validation : evaluated.test) = reduceMetrics(local[i], task, comm);
  }
  return evaluated;
}

void reportEpoch(const std::vector<std::unique_ptr<outputs::MetricSink>>& sinks, const outputs::EpochSummary& summary,
                 const outputs::Timer& timer, double position) {
  const auto emit = [&](const std::string& name, double value, const std::string& split) {
    for (auto& sink : sinks) sink->metric({name, value, split, position, summary.step, summary.bits});
  };
  for (const auto& kv : summary.train) emit(kv.first, kv.second, "train");
  emitEvaluated(sinks, summary, position, summary.step, summary.bits);
  const auto batch_stats = timer.stats().find("batch");
  if (batch_stats != timer.stats().end() && batch_stats->second.events > 0) {
    emit("time_per_batch", batch_stats->second.total_s / batch_stats->second.events, "train");
  }
  emit("learning_rate", summary.learning_rate, "train");
  emit("elapsed_s", summary.elapsed_s, "train");
  for (auto& sink : sinks) sink->epochEnd(summary);
}

std::optional<outputs::EvaluatedSplits> evaluateRankZeroModel(tasks::Task& task, comm::Communicator& comm,
                                                              const tasks::Shard& shard,
                                                              const tasks::EvaluationLimits& evaluation,
                                                              WorkerRole& role, outputs::Timer& timer,
                                                              const std::vector<at::Tensor>& params) {
  auto scope = timer.scope("replica.evaluation");
  auto replica = copiesOf(params);
  for (auto& p : replica) comm.broadcast(p, 0);
  EvaluatedModel evaluated(params);
  evaluated.swapIn(replica);
  auto splits = evaluateSplits(task, comm, shard, evaluation, role);
  evaluated.restore();
  return splits;
}

std::optional<std::string> nonFiniteMetric(const outputs::EpochSummary& summary) {
  const std::pair<const char*, const std::map<std::string, double>*> splits[] = {
      {"validation", &summary.validation},
      {"test", &summary.test},
      {"replica_validation", &summary.replica.validation},
      {"replica_test", &summary.replica.test}};
  for (const auto& [split, metrics] : splits) {
    for (const auto& [name, value] : *metrics) {
      if (std::isfinite(value)) continue;
      const char* shown = std::isnan(value) ? "nan" : value > 0 ? "inf" : "-inf";
      return std::string("the evaluated ") + split + " " + name + " is " + shown;
    }
  }
  return std::nullopt;
}

void TrainingEvents::train(const std::string& name, double value, double position, int64_t window) const {
  for (auto& sink : sinks_) sink->metric({name, value, "train", position, step_, bits_, window});
}

void TrainingEvents::sync(const std::optional<SyncEvent>& event, double position) const {
  if (!event) return;
  train("bits_per_sync", static_cast<double>(event->bits), position);
  if (event->replica_drift) train("replica_drift", *event->replica_drift, position);
}

void TrainingEvents::progress(const outputs::Progress& progress) const {
  for (auto& sink : sinks_) sink->progress(progress);
}

void TrainingEvents::evaluation(const outputs::EpochSummary& evaluated, double position, double elapsed_s) const {
  emitEvaluated(sinks_, evaluated, position, step_, bits_);
  train("elapsed_s", elapsed_s, position);
}

double meanWindowLoss(double window_loss, int64_t window, comm::Communicator& comm) {
  auto total = torch::full({1}, window_loss, torch::TensorOptions().dtype(torch::kFloat64).device(comm.device()));
  comm.allreduceSum(total);
  return total.cpu().item<double>() / static_cast<double>(comm.size() * window);
}

}  // namespace gcrun::experiments
