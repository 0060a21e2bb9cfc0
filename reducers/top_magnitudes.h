#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace gcrun::reducers {

// Exactly what at::topk(flat.abs(), k, 0, /*largest=*/true, /*sorted=*/false) returns as indices
// (int64), which the top-k reducers put on the wire in that order, ties included. LibTorch's CPU
// top-k, when 64 k <= numel, runs std::partial_sort over the (value, index) pairs of the whole
// tensor: a heap of the first k, which each later pair enters when it is larger than the heap's
// least, then a heap sort. A pair that does not enter leaves the heap as it is, so the same
// std::partial_sort over the first k pairs and those that enter returns the same k pairs in the
// same order; which ones enter follows from the magnitudes alone, in one pass over the tensor,
// without its n-pair copy. NaNs, other regimes and a LibTorch whose result differs (checked once)
// fall back to at::topk itself.
at::Tensor topMagnitudePositions(const at::Tensor& flat, int64_t k);

}  // namespace gcrun::reducers
