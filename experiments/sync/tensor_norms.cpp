#include "experiments/sync/tensor_norms.h"

#include <ATen/ATen.h>

namespace gcrun::experiments {

double globalNorm(const std::vector<at::Tensor>& tensors) {
  if (tensors.empty()) return 0;
  std::vector<at::Tensor> norms;
  for (const auto& t : tensors) norms.push_back(t.norm().to(at::kDouble));
  return at::stack(norms).norm().item<double>();
}

std::vector<double> doublesOf(const std::vector<at::Tensor>& scalars) {
  if (scalars.empty()) return {};
  const auto all = at::stack(scalars).to(at::kCPU, at::kDouble).contiguous();
  return {all.data_ptr<double>(), all.data_ptr<double>() + all.numel()};
}

}  // namespace gcrun::experiments
