#include "experiments/training/worker_metrics.h"

#include <torch/torch.h>

namespace gcrun::experiments {

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
      local.push_back(task.evaluate(shard, split, evaluation));
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
  for (const auto& kv : summary.validation) emit(kv.first, kv.second, "validation");
  for (const auto& kv : summary.test) emit(kv.first, kv.second, "test");
  for (const auto& kv : summary.replica.validation) emit(kv.first, kv.second, "replica_validation");
  for (const auto& kv : summary.replica.test) emit(kv.first, kv.second, "replica_test");
  const auto batch_stats = timer.stats().find("batch");
  if (batch_stats != timer.stats().end() && batch_stats->second.events > 0) {
    emit("time_per_batch", batch_stats->second.total_s / batch_stats->second.events, "train");
  }
  emit("learning_rate", summary.learning_rate, "train");
  emit("elapsed_s", summary.elapsed_s, "train");
  for (auto& sink : sinks) sink->epochEnd(summary);
}

}  // namespace gcrun::experiments
