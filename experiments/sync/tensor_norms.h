#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

namespace gcrun::experiments {

// The 2-norm of all the tensors together, in float64.
double globalNorm(const std::vector<at::Tensor>& tensors);

// Each of `scalars` (one-element tensors on any device) as a double, with one copy to the CPU.
std::vector<double> doublesOf(const std::vector<at::Tensor>& scalars);

}  // namespace gcrun::experiments
