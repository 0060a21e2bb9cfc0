#pragma once

// The inverses of what the codecs write, for tests that read their messages field by field.

#include <cstdint>

#include <ATen/ATen.h>

#include "reducers/bit_stream.h"

namespace gcrun::reducers {

// `count` int64 codes of `bits` bits from a uint8 tensor made by packBits (quantized_reducer.h).
inline at::Tensor unpackBits(const at::Tensor& bytes, int64_t count, int64_t bits) {
  const auto cpu = bytes.to(at::kCPU).contiguous();
  auto codes = at::empty({count}, at::kLong);
  int64_t* code = codes.data_ptr<int64_t>();
  for (int64_t i = 0; i < count; ++i) {
    code[i] = static_cast<int64_t>(fieldAt(cpu.data_ptr<uint8_t>(), cpu.numel(), i, static_cast<int>(bits)));
  }
  return codes.to(bytes.device());
}

// A float32 tensor's bytes in native order: the inverse of bytesAsFloats.
inline at::Tensor floatsAsBytes(const at::Tensor& floats) { return floats.to(at::kFloat).contiguous().view(at::kByte); }

}  // namespace gcrun::reducers
