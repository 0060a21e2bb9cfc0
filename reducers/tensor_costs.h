#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "reducers/reducer.h"

namespace gcrun::reducers {

// Helpers for Reducer::lastCosts().
using TensorCost = Reducer::TensorCost;

// `total` split into parts in proportion to `weights`, rounded so that the parts add up to `total`
// exactly (part i is floor(total * W_i / W) - floor(total * W_(i-1) / W), W_i the running sum).
// Weights that are all zero split it evenly.
inline std::vector<uint64_t> splitInProportion(uint64_t total, const std::vector<int64_t>& weights) {
  unsigned __int128 sum = 0;
  for (int64_t w : weights) sum += static_cast<uint64_t>(w);
  const bool even = sum == 0;
  if (even) sum = weights.size();
  std::vector<uint64_t> parts;
  parts.reserve(weights.size());
  unsigned __int128 running = 0;
  uint64_t given = 0;
  for (int64_t w : weights) {
    running += even ? 1 : static_cast<uint64_t>(w);
    const auto upto = static_cast<uint64_t>(total * running / sum);
    parts.push_back(upto - given);
    given = upto;
  }
  return parts;
}

// The element counts of `tensors`, the weights by which a message packing them all is split.
inline std::vector<int64_t> elementCounts(const std::vector<at::Tensor>& tensors) {
  std::vector<int64_t> counts;
  counts.reserve(tensors.size());
  for (const auto& t : tensors) counts.push_back(t.numel());
  return counts;
}

// `message_bits` shared by tensors of `counts` elements in proportion to their elements.
inline std::vector<TensorCost> costsByElements(uint64_t message_bits, const std::vector<int64_t>& counts) {
  std::vector<TensorCost> costs;
  for (uint64_t bits : splitInProportion(message_bits, counts)) costs.push_back({bits, 0});
  return costs;
}

}  // namespace gcrun::reducers
