#include "experiments/sync/tensor_norms.h"

#include <cmath>

#include <ATen/ATen.h>

namespace gcrun::experiments {

double globalNorm(const std::vector<at::Tensor>& tensors) {
  if (tensors.empty()) return 0;
  std::vector<at::Tensor> norms;
  for (const auto& t : tensors) norms.push_back(t.norm().to(at::kDouble));
  return at::stack(norms).norm().item<double>();
}

int64_t firstNonFinite(const std::vector<at::Tensor>& sums) {
  if (sums.empty() || std::isfinite(at::stack(sums).sum().item<double>())) return -1;
  for (size_t i = 0; i < sums.size(); ++i) {
    if (!std::isfinite(sums[i].item<double>())) return static_cast<int64_t>(i);
  }
  return -1;
}

std::vector<double> doublesOf(const std::vector<at::Tensor>& scalars) {
  if (scalars.empty()) return {};
  const auto all = at::stack(scalars).to(at::kCPU, at::kDouble).contiguous();
  return {all.data_ptr<double>(), all.data_ptr<double>() + all.numel()};
}

}  // namespace gcrun::experiments
