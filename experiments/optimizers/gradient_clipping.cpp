#include "experiments/optimizers/gradient_clipping.h"

#include <numeric>

#include <ATen/ATen.h>

namespace gcrun::experiments {
namespace {

// torch.norm(g, 2.0) without a dim reduces over the list of all of g's dims.
at::Tensor normOverAllDims(const at::Tensor& g) {
  std::vector<int64_t> dims(static_cast<size_t>(g.dim()));
  std::iota(dims.begin(), dims.end(), 0);
  return at::norm(g, c10::optional<at::Scalar>(2.0), dims, false);
}

}  // namespace

void clipGradientNorm(const std::vector<at::Tensor>& grads, double max_norm) {
  if (grads.empty()) return;
  std::vector<at::Tensor> norms;
  norms.reserve(grads.size());
  for (const auto& g : grads) norms.push_back(normOverAllDims(g));
  const at::Tensor total = normOverAllDims(at::stack(norms));
  // Python's `float / tensor` is tensor.reciprocal() * float (torch/_tensor.py __rdiv__).
  const at::Tensor coefficient = (total + 1e-6).reciprocal() * max_norm;
  const at::Tensor clamped = at::clamp(coefficient, c10::nullopt, 1.0);
  for (const auto& g : grads) g.mul_(clamped);
}

}  // namespace gcrun::experiments
