#pragma once

#include <cstdint>

namespace gcrun::reducers {

// packBits' layout (quantized_reducer.h) written and read one field at a time over raw bytes, so
// that an encoder or decoder makes one fused pass over its tensors instead of one tensor op per
// bit. Fields of up to 64 bits; a 128-bit accumulator holds the < 8 pending bits plus one field.
class BitWriter {
 public:
  explicit BitWriter(uint8_t* out) : out_(out) {}
  // Appends the low `bits` bits of `code`.
  void put(uint64_t code, int bits) {
    pending_ |= static_cast<unsigned __int128>(code & mask(bits)) << count_;
    count_ += bits;
    while (count_ >= 8) {
      *out_++ = static_cast<uint8_t>(pending_);
      pending_ >>= 8;
      count_ -= 8;
    }
  }
  // Writes the last, zero-padded byte if a field ends inside it.
  void finish() {
    if (count_ > 0) *out_++ = static_cast<uint8_t>(pending_);
    pending_ = 0;
    count_ = 0;
  }
  static uint64_t mask(int bits) { return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1; }

 private:
  uint8_t* out_;
  unsigned __int128 pending_ = 0;
  int count_ = 0;
};

class BitReader {
 public:
  explicit BitReader(const uint8_t* in) : in_(in) {}
  uint64_t get(int bits) {
    while (count_ < bits) {
      pending_ |= static_cast<unsigned __int128>(*in_++) << count_;
      count_ += 8;
    }
    const uint64_t code = static_cast<uint64_t>(pending_) & BitWriter::mask(bits);
    pending_ >>= bits;
    count_ -= bits;
    return code;
  }

 private:
  const uint8_t* in_;
  unsigned __int128 pending_ = 0;
  int count_ = 0;
};

}  // namespace gcrun::reducers
