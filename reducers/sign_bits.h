#pragma once

#include <cstdint>

#include <ATen/ATen.h>

#include "reducers/quantized_reducer.h"

namespace gcrun::reducers {

// Signs as the reference's SignCompressor puts them on the wire: one bit per element, the count
// zero-padded to a multiple of 32 (bit2byte packs 32 signs into each int32 word), so
// 32 * ceil(n / 32) bits. Bit 1 means negative, so a zero element is sent as +1: one bit cannot
// say 0. The bits are laid out by packBits.
inline int64_t paddedSignCount(int64_t count) { return (count + 31) / 32 * 32; }

// A flat tensor's signs as paddedSignCount(numel) / 8 bytes.
inline at::Tensor packSigns(const at::Tensor& flat) {
  auto negative = at::zeros({paddedSignCount(flat.numel())}, flat.options().dtype(at::kLong));
  negative.narrow(0, 0, flat.numel()).copy_(flat.lt(0));
  return packBits(negative, 1);
}

// The first `count` signs of packed bytes, as +1 / -1 in `dtype`.
inline at::Tensor unpackSigns(const at::Tensor& bytes, int64_t count, at::ScalarType dtype) {
  return unpackBits(bytes, count, 1).to(dtype).mul_(-2).add_(1);
}

}  // namespace gcrun::reducers
