#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace gcrun::experiments {

// The 2-norm of all the tensors together, in float64.
double globalNorm(const std::vector<at::Tensor>& tensors);

// The first of `sums` (each a tensor's sum) that is nan or inf, or -1, with one synchronisation: a
// sum is finite when every element is, and costs a fraction of an isfinite mask. A tensor whose
// finite elements add up past float32's range (~1e38) counts as diverged too.
int64_t firstNonFinite(const std::vector<at::Tensor>& sums);

// Each of `scalars` (one-element tensors on any device) as a double, with one copy to the CPU.
std::vector<double> doublesOf(const std::vector<at::Tensor>& scalars);

}  // namespace gcrun::experiments
