#include "experiments/sync/replicas.h"

#include <cmath>

#include <torch/torch.h>

#include "reducers/reducer.h"

namespace gcrun::experiments {

uint64_t averageParameters(comm::Communicator& comm, const std::vector<at::Tensor>& params) {
  torch::NoGradGuard no_grad;
  if (params.empty()) return 0;
  std::vector<at::Tensor> flat;
  for (const auto& p : params) flat.push_back(p.detach().reshape(-1));
  auto all = torch::cat(flat);
  all.div_(comm.size());
  comm.allreduceSum(all);
  int64_t offset = 0;
  for (const auto& p : params) {
    p.detach().copy_(all.narrow(0, offset, p.numel()).view_as(p));
    offset += p.numel();
  }
  return reducers::bitsOf(all);
}

double replicaDrift(comm::Communicator& comm, const std::vector<at::Tensor>& params) {
  torch::NoGradGuard no_grad;
  auto mean = copiesOf(params);
  averageParameters(comm, mean);
  double distance = 0, norm = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    distance += (params[i].detach() - mean[i]).to(torch::kFloat64).square().sum().item<double>();
    norm += mean[i].to(torch::kFloat64).square().sum().item<double>();
  }
  auto total = torch::tensor({distance}, torch::TensorOptions().dtype(torch::kFloat64).device(comm.device()));
  comm.allreduceSum(total);
  return norm > 0 ? std::sqrt(total.cpu().item<double>() / comm.size() / norm) : 0.0;
}

SyncEvent measuredSync(comm::Communicator& comm, const std::vector<at::Tensor>& params, bool measure_drift,
                       const std::function<uint64_t()>& sync) {
  SyncEvent event;
  if (measure_drift) event.replica_drift = replicaDrift(comm, params);
  event.bits = sync();
  return event;
}

std::vector<at::Tensor> copiesOf(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> copies;
  for (const auto& t : tensors) copies.push_back(t.detach().clone());
  return copies;
}

void copyInto(const std::vector<at::Tensor>& to, const std::vector<at::Tensor>& from) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < to.size(); ++i) to[i].detach().copy_(from[i]);
}

void EvaluatedModel::swapIn(const std::vector<at::Tensor>& model) {
  kept_ = copiesOf(params_);
  copyInto(params_, model);
}

void EvaluatedModel::restore() {
  if (kept_.empty()) return;
  copyInto(params_, kept_);
  kept_.clear();
}

}  // namespace gcrun::experiments
