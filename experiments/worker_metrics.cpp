#include "experiments/worker_metrics.h"

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

double globalNorm(const std::vector<at::Tensor>& tensors) {
  if (tensors.empty()) return 0;
  std::vector<at::Tensor> norms;
  for (const auto& t : tensors) norms.push_back(t.norm().to(at::kDouble));
  return at::stack(norms).norm().item<double>();
}

}  // namespace gcrun::experiments
