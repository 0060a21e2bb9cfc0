#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace gcrun::experiments {

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
};

// What goes on the wire for one tensor, three tensors whose sizes follow from the layout alone:
// the kept positions in the flattened tensor as int32, chunk by chunk and within a chunk by
// descending magnitude; their 2-bit codes (bit 0: negative, bit 1: the upper level), four to a
// byte from the low bits up, the last byte zero-padded; and the levels as float32 (chunks, 2),
// (lower, upper) per chunk.
struct TwoBitTopK {
  at::Tensor positions, codes, levels;
};

// `values` flattened, encoded as above.
TwoBitTopK encodeTwoBitTopK(const at::Tensor& values, const TwoBitTopKLayout& layout);
// The dense float32 tensor of layout.numel elements that `payload` stands for: zero where nothing
// was kept.
at::Tensor decodeTwoBitTopK(const TwoBitTopK& payload, const TwoBitTopKLayout& layout);
// The payload's bits (reducers::bitsOf of its tensors, the repo's top-k convention of 32-bit
// positions): 32 per kept position, 2 per kept value rounded up to whole bytes, 64 per chunk.
uint64_t twoBitTopKBits(const TwoBitTopKLayout& layout);

}  // namespace gcrun::experiments
