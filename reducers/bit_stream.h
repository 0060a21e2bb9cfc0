#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace gcrun::reducers {

// packBits' layout (quantized_reducer.h) written and read one field at a time over raw bytes, so
// that an encoder or decoder makes one fused pass over its tensors instead of one tensor op per
// bit. Fields of up to 64 bits. The stream is little-endian bytes, so whole 32-bit words of it are
// written at once.
class BitWriter {
 public:
  explicit BitWriter(uint8_t* out) : out_(out) {}
  // Appends the low `bits` bits of `code`.
  void put(uint64_t code, int bits) {
    if (bits > 32) {
      putWord(code & mask(32), 32);
      putWord(code >> 32 & mask(bits - 32), bits - 32);
    } else {
      putWord(code & mask(bits), bits);
    }
  }
  // Writes the last, zero-padded bytes the fields end in.
  void finish() {
    for (; count_ > 0; count_ -= std::min(count_, 8)) {
      *out_++ = static_cast<uint8_t>(pending_);
      pending_ >>= 8;
    }
    pending_ = 0;
  }
  static uint64_t mask(int bits) { return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1; }

 private:
  // code < 2^bits, bits <= 32, and fewer than 32 bits pending: the sum fits in 64.
  void putWord(uint64_t code, int bits) {
    pending_ |= code << count_;
    count_ += bits;
    if (count_ >= 32) {
      const auto word = static_cast<uint32_t>(pending_);
      uint8_t bytes[4] = {static_cast<uint8_t>(word), static_cast<uint8_t>(word >> 8), static_cast<uint8_t>(word >> 16),
                          static_cast<uint8_t>(word >> 24)};
      std::memcpy(out_, bytes, 4);
      out_ += 4;
      pending_ >>= 32;
      count_ -= 32;
    }
  }

  uint8_t* out_;
  uint64_t pending_ = 0;
  int count_ = 0;
};

// Field `index` (of `bits` bits) of a packed stream of `size` bytes, read at random: one
// unaligned 8-byte load where it fits, so decoders have no dependency between elements.
inline uint64_t fieldAt(const uint8_t* bytes, int64_t size, int64_t index, int bits) {
  const int64_t position = index * bits;
  const int64_t first = position >> 3;
  const int shift = static_cast<int>(position & 7);
  if (bits <= 56 && first + 8 <= size) {
    uint64_t word;
    std::memcpy(&word, bytes + first, sizeof(word));
    return (word >> shift) & BitWriter::mask(bits);
  }
  unsigned __int128 word = 0;
  for (int b = 0; 8 * b < shift + bits; ++b) word |= static_cast<unsigned __int128>(bytes[first + b]) << (8 * b);
  return static_cast<uint64_t>(word >> shift) & BitWriter::mask(bits);
}

}  // namespace gcrun::reducers
