#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace gcrun::reducers {

// SparseLoCo's compressor (Sarfi et al., arXiv 2508.15706): chunk-wise top-k with 2-bit values.
// A flattened tensor of n elements is split into chunks of `chunk` elements (the last one shorter
// when chunk does not divide n). A chunk of m elements keeps its k = max(1, ceil(density * m))
// entries of largest magnitude (a product within 1e-9 of a whole number counts as that number);
// of equal magnitudes, the lower index first. Each kept value
// becomes a sign and one magnitude bit choosing one of the chunk's two levels: the kept
// magnitudes sorted, the lower half is the floor(k / 2) smallest, the upper half the rest, and each
// level is the mean magnitude of its half (k == 1: both levels are that one magnitude). The value
// decodes as sign * level.
struct TwoBitTopKLayout {
  int64_t numel = 0;
  int64_t chunk = 1;
  double density = 1;

  int64_t chunks() const;
  int64_t keptIn(int64_t chunk_size) const;  // k of a chunk of chunk_size elements
  int64_t kept() const;                      // over all chunks
  // The bits of a kept value's position within its chunk: ceil(log2(chunk)), 12 for 4096.
  int64_t indexBits() const;
};

// One tensor's payload, unpacked: the kept positions within their chunk (int64), chunk by chunk
// and within a chunk by descending magnitude; their 2-bit codes (uint8, bit 0: negative, bit 1:
// the upper level); and the levels as float32 (chunks, 2), (lower, upper) per chunk.
struct TwoBitTopK {
  at::Tensor positions, codes, levels;
};

// `values` flattened, encoded as above.
TwoBitTopK encodeTwoBitTopK(const at::Tensor& values, const TwoBitTopKLayout& layout);
// What `payload` stands for, sparse: each kept value's position in the flattened tensor (int64) and
// its decoded float32 value, in payload order; each position once.
struct KeptValues {
  at::Tensor positions, values;
};
KeptValues decodeKept(const TwoBitTopK& payload, const TwoBitTopKLayout& layout);
// The same, dense: float32, layout.numel elements, zero where nothing was kept.
at::Tensor decodeTwoBitTopK(const TwoBitTopK& payload, const TwoBitTopKLayout& layout);

// The published format on the wire (Templar's pack_12bit_indices for chunks of 4096), uint8 bytes:
// the levels as float32 (8 bytes per chunk, native order), then the positions as indexBits()-bit
// fields, then the codes as 2-bit fields, each stream packed by packBits (least significant bit
// first, so two 12-bit positions fill 3 bytes: a0-a7 | a8-a11 b0-b3 | b4-b11) and zero-padded to
// a whole byte.
at::Tensor packTwoBitTopK(const TwoBitTopK& payload, const TwoBitTopKLayout& layout);
TwoBitTopK unpackTwoBitTopK(const at::Tensor& bytes, const TwoBitTopKLayout& layout);
// The packed payload's bits: 64 per chunk plus the two streams rounded up to whole bytes; at
// chunk 4096 with 64 kept, 64 * (12 + 2) + 64 = 960 per chunk, 0.234375 bit per element.
uint64_t twoBitTopKBits(const TwoBitTopKLayout& layout);

}  // namespace gcrun::reducers
