#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hyperparams/config.h"
#include "reducers/reducer.h"

namespace gcrun::reducers {

// `reducer.granularity` decides what one compression unit is. At `layer` the reducer sees the
// model's tensors as they are. At `model` and `bucket` a wrapper groups them and hands the reducer
// one tensor per group instead:
//  - model: one group, every tensor in registration order (PyTorch's batched_powerSGD_hook over the
//    whole gradient);
//  - bucket: DDP-style buckets of about reducer.bucket_mb MiB, filled from the last registered
//    tensor backwards as DDP does (the order gradients become ready), a bucket closing once it holds
//    at least bucket_mb; DDP's smaller first bucket (1 MiB) is not reproduced.
// Each group travels as ONE square matrix [side, side], side = ceil(sqrt(L)) for its L elements,
// filled row-major and zero-padded, as batched_powerSGD_hook does. One layout serves every reducer:
// low-rank reducers need a matrix and treat 1-D tensors as uncompressible, element-wise ones do not
// care about the shape, and the padding costs fewer than 2·side elements. The padding is reset to
// zero before every call, and what the reducer writes there (output, memory) is dropped: error
// feedback is kept per parameter by the trainer, so the padding carries no memory.
using TensorGroups = std::vector<std::vector<size_t>>;

// The bucket partition of `tensors` (indices into it): reverse registration order, a bucket closes
// once it holds at least bucket_bytes, or before a tensor of another dtype or device.
TensorGroups bucketGroups(const std::vector<at::Tensor>& tensors, int64_t bucket_bytes);

// reducer.bucket_mb in bytes.
int64_t bucketBytes(const ReducerOptions& options);

// DDP's buckets (bucket_cap_mb, 25 MiB by default as reducer.bucket_mb is, its first bucket at most
// 1 MiB so that communication starts early), over tensors of `tensor_bytes` in registration order:
// taken in reverse, the order backward produces them, a bucket closing once it holds its cap. The
// exact reducer all-reduces these buckets, and `gcrun plan` sizes every step's messages by them.
inline constexpr int64_t kDdpFirstBucketBytes = 1 << 20;
TensorGroups ddpBuckets(const std::vector<int64_t>& tensor_bytes, int64_t bucket_bytes);

// ceil(sqrt(numel)): the side of the square a group of numel elements is padded to.
int64_t squareSide(int64_t numel);

// `inner` as is at granularity layer; otherwise wrapped so that it reduces one padded square per
// group (see above).
std::unique_ptr<Reducer> withGranularity(std::unique_ptr<Reducer> inner, const ReducerOptions& options);

}  // namespace gcrun::reducers
