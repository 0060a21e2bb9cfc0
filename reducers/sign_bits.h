#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>
#include <c10/util/accumulate.h>

namespace gcrun::reducers {

// Signs as the reference's SignCompressor puts them on the wire: one bit per element, the count
// zero-padded to a multiple of 32 (bit2byte packs 32 signs into each int32 word), so
// 32 * ceil(n / 32) bits. Bit 1 means negative, so a zero element is sent as +1: one bit cannot
// say 0. The bits are laid out by packBits (element i is bit i % 8 of byte i / 8).
inline int64_t paddedSignCount(int64_t count) { return (count + 31) / 32 * 32; }

// The packed signs of a whole gradient of `shapes`: one message, padded once, so a whole step's
// bits rather than a sum over its buckets.
inline uint64_t plannedSignBits(const std::vector<std::vector<int64_t>>& shapes) {
  int64_t count = 0;
  for (const auto& shape : shapes) count += c10::multiply_integers(shape);
  return static_cast<uint64_t>(paddedSignCount(count));
}

// A flat float32 CPU tensor's signs as paddedSignCount(numel) / 8 bytes, eight elements a byte.
inline at::Tensor packSigns(const at::Tensor& flat) {
  const int64_t n = flat.numel();
  auto bytes = at::zeros({paddedSignCount(n) / 8}, at::kByte);
  uint8_t* out = bytes.data_ptr<uint8_t>();
  const float* x = flat.data_ptr<float>();
  const int64_t whole = n / 8;
  for (int64_t b = 0; b < whole; ++b) {
    const float* v = x + 8 * b;
    out[b] = static_cast<uint8_t>((v[0] < 0) | (v[1] < 0) << 1 | (v[2] < 0) << 2 | (v[3] < 0) << 3 | (v[4] < 0) << 4 |
                                  (v[5] < 0) << 5 | (v[6] < 0) << 6 | (v[7] < 0) << 7);
  }
  for (int64_t i = 8 * whole; i < n; ++i) out[whole] |= static_cast<uint8_t>((x[i] < 0) << (i - 8 * whole));
  return bytes;
}

// The sign a packed element was sent with, -1 or +1, computed as bit * -2 + 1 without a branch.
inline float sentSign(const uint8_t* bytes, int64_t i) {
  return static_cast<float>((bytes[i >> 3] >> (i & 7)) & 1) * -2.0f + 1.0f;
}

}  // namespace gcrun::reducers
