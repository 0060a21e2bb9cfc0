#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

namespace gcrun::experiments {

// torch.nn.utils.clip_grad_norm_ of torch 1.13 (norm_type 2), op for op, so that a PyTorch run
// gets the same bits: the norm of the per-tensor norms, coef = max_norm / (total + 1e-6) as Python
// evaluates it (reciprocal, then times max_norm), clamped to at most 1, and every gradient
// multiplied by it, even when it is 1.
void clipGradientNorm(const std::vector<at::Tensor>& grads, double max_norm);

}  // namespace gcrun::experiments
