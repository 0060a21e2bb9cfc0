#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <ATen/ATen.h>

#include "reducers/reducer.h"

namespace gcrun::reducers {

// Which elements of a tensor of `numel` travel: `count` distinct int64 indices (CPU), drawn from
// the shared generator, so every worker picks the same ones without communicating.
using IndexSampler = std::function<at::Tensor(int64_t numel, int64_t count, at::Generator& shared)>;

// random-k's sampler: at::randperm(numel, shared).narrow(0, 0, count), with the same draws and the
// generator left where randperm leaves it, without building the permutation.
at::Tensor firstOfRandomPermutation(int64_t numel, int64_t count, at::Generator& shared);

// The reference's UniformRandomSparse(Block)Reducer around a sampler: per tensor k = max(1,
// floor(c numel)) sampled elements (c = reducer.compression), all tensors' values in one
// all-reduce, divided by W and written at their indices into a zero gradient. The generator is
// seeded with the shared seed and advances at every call. Bits = 32 K (K = sum of the k's):
// indices are never sent.
// reducer.rescale (gcrun's, off in the reference) multiplies what is delivered by numel / k: every
// element is sampled with probability k / numel, so the update becomes unbiased. Memory = g minus
// what was delivered for it: g with the sampled entries zeroed, or (1 - numel / k) g there when
// rescaling.
// `reference_name`: the reference's class name of the variant.
ReducerSpec randomSparseSpec(IndexSampler sampler, std::string reference_name);

}  // namespace gcrun::reducers
