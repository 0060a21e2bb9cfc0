#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace gcrun::reducers {

// Exactly what at::topk(flat.abs(), k, 0, /*largest=*/true, /*sorted=*/false) returns as indices
// (int64), which the top-k reducers put on the wire in that order. LibTorch 1.13's CPU top-k
// partial-sorts (value, index) pairs of the whole tensor when 64 k <= numel: the k largest in
// descending order. When those are distinct and strictly above the rest, that result is unique,
// so a selection (nth_element) plus a sort of the k winners gives the same indices in a fraction
// of the time. Ties, NaNs and other regimes fall back to at::topk itself.
at::Tensor topMagnitudePositions(const at::Tensor& flat, int64_t k);

}  // namespace gcrun::reducers
