#include "reducers/float_formats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "reducers/tensor_buffer.h"
#include "reducers/tensor_costs.h"

namespace gcrun::reducers {

Minifloat e4m3() { return {4, 3, 7, Minifloat::Top::nan_only}; }
Minifloat e5m2() { return {5, 2, 15, Minifloat::Top::ieee}; }
Minifloat e3m0() { return {3, 0, 3, Minifloat::Top::finite}; }

uint32_t Minifloat::maxFiniteCode() const {
  const uint32_t all_ones = (1u << (exponent_bits + mantissa_bits)) - 1;
  switch (top) {
    case Top::nan_only:
      return all_ones - 1;
    case Top::ieee:
      return all_ones - (1u << mantissa_bits);  // the exponent below all ones, mantissa all ones
    case Top::finite:
      break;
  }
  return all_ones;
}

float Minifloat::decode(uint32_t code) const {
  const uint32_t magnitude_bits = static_cast<uint32_t>(exponent_bits + mantissa_bits);
  const bool negative = (code >> magnitude_bits & 1u) != 0;
  const uint32_t magnitude = code & ((1u << magnitude_bits) - 1);
  const int exponent = static_cast<int>(magnitude >> mantissa_bits);
  const auto mantissa = static_cast<float>(magnitude & ((1u << mantissa_bits) - 1));
  float value;
  if (magnitude > maxFiniteCode()) {
    const bool infinite = top == Top::ieee && (magnitude & ((1u << mantissa_bits) - 1)) == 0;
    value = infinite ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  } else if (exponent == 0) {
    value = std::ldexp(mantissa, 1 - bias - mantissa_bits);
  } else {
    value = std::ldexp(std::ldexp(1.0f, mantissa_bits) + mantissa, exponent - bias - mantissa_bits);
  }
  return negative ? -value : value;
}

namespace {

// Minifloat::encode with the format's constants computed once, branch-free so that a loop over
// elements vectorizes.
class Encoder {
 public:
  explicit Encoder(const Minifloat& format)
      : magnitude_shift_(format.exponent_bits + format.mantissa_bits),
        drop_(23 - format.mantissa_bits),
        rebias_(static_cast<uint32_t>(127 - format.bias) << format.mantissa_bits),
        max_code_(format.maxFiniteCode()),
        nan_code_(format.top == Minifloat::Top::finite ? 0 : (1u << magnitude_shift_) - 1),
        smallest_normal_(std::ldexp(1.0f, 1 - format.bias)),
        subnormal_steps_(std::ldexp(1.0f, format.bias - 1 + format.mantissa_bits)) {}

  // Below the smallest normal the value is a multiple of the subnormal step 2^(1 - bias - M):
  // scaled by a power of two (exact) and rounded to an integer, ties to even, by adding and taking
  // away 2^23 in float32 (the scaled value is at most 2^M). At or above it, float32's own mantissa
  // is rounded from 23 bits to M, ties to even, on the bits (a carry moves into the exponent, as it
  // should), and re-biased.
  uint32_t operator()(float value) const {
    uint32_t pattern;
    std::memcpy(&pattern, &value, sizeof(pattern));
    const uint32_t magnitude_bits = pattern & 0x7FFFFFFFu;
    const float magnitude = std::fabs(value);
    const float steps = std::min(magnitude, smallest_normal_) * subnormal_steps_;
    const auto subnormal = static_cast<uint32_t>((steps + 0x1p23f) - 0x1p23f);
    const uint32_t rounded = (magnitude_bits + (1u << (drop_ - 1)) - 1 + ((magnitude_bits >> drop_) & 1u)) >> drop_;
    const uint32_t normal = std::min(rounded > rebias_ ? rounded - rebias_ : 0, max_code_);
    const uint32_t code = magnitude < smallest_normal_ ? subnormal : normal;
    return (pattern >> 31) << magnitude_shift_ | (magnitude_bits > 0x7F800000u ? nan_code_ : code);
  }

 private:
  int magnitude_shift_, drop_;
  uint32_t rebias_, max_code_, nan_code_;
  float smallest_normal_, subnormal_steps_;
};

}  // namespace

uint32_t Minifloat::encode(float value) const { return Encoder(*this)(value); }

namespace {

class MinifloatCodec : public GradientCodec {
 public:
  MinifloatCodec(const Minifloat& format, int64_t group)
      : format_(format), encode_(format), largest_(format.maxFinite()), group_(group) {
    for (uint32_t code = 0; code < (1u << format.bits()); ++code) table_.push_back(format.decode(code));
  }

  at::Tensor encode(const std::vector<at::Tensor>& tensors) override {
    const auto layout = layoutOf(tensors);
    auto message = at::empty({layout.header + packedBytes(layout.elements, format_.bits())}, at::kByte);
    auto* multipliers = reinterpret_cast<float*>(message.data_ptr<uint8_t>());
    const bool packed = format_.bits() == 4;
    if (packed && codes_.numel() != layout.elements) codes_ = at::empty({layout.elements}, at::kByte);
    uint8_t* codes = !packed ? message.data_ptr<uint8_t>() + layout.header : codes_.data_ptr<uint8_t>();
    for (const auto& t : tensors) {
      const CpuFloats values(t);
      const float* x = values.data();
      for (int64_t start = 0; start < t.numel(); start += groupSize(t.numel())) {
        const int64_t size = std::min(groupSize(t.numel()), t.numel() - start);
        const float m = multiplierOf(x + start, size);
        *multipliers++ = m;
        for (int64_t j = 0; j < size; ++j) codes[j] = static_cast<uint8_t>(encode_(x[start + j] * m));
        codes += size;
      }
    }
    if (packed) packNibbles(codes_.data_ptr<uint8_t>(), layout.elements, message, layout.header);
    return message.to(tensors.empty() ? at::kCPU : tensors.front().device());
  }

  void decode(const at::Tensor& message, const std::vector<at::Tensor>& tensors) const override {
    const auto bytes = message.to(at::kCPU).contiguous();
    const auto layout = layoutOf(tensors);
    const auto multipliers = bytesAsFloats(bytes.narrow(0, 0, layout.header));
    const float* m = multipliers.data_ptr<float>();
    const uint8_t* fields = bytes.data_ptr<uint8_t>() + layout.header;
    const float* value = table_.data();
    int64_t index = 0;
    for (const auto& t : tensors) {
      const CpuFloats target(t);
      float* out = target.data();
      for (int64_t start = 0; start < t.numel(); start += groupSize(t.numel())) {
        const int64_t size = std::min(groupSize(t.numel()), t.numel() - start);
        const float divisor = *m++;
        if (format_.bits() == 8) {
          for (int64_t j = 0; j < size; ++j) out[start + j] = value[fields[index + j]] / divisor;
        } else {
          for (int64_t j = 0; j < size; ++j) {
            const int64_t i = index + j;
            out[start + j] = value[(fields[i >> 1] >> ((i & 1) * 4)) & 0xF] / divisor;
          }
        }
        index += size;
      }
      target.writeBack();
    }
  }

  // Each tensor's own multipliers, and its elements' share of the packed codes (exact at 8 bits;
  // at 4 bits the shared padding byte is split in proportion, so the parts add up to the message).
  std::vector<uint64_t> bitsByTensor(const std::vector<int64_t>& counts) const override {
    int64_t total = 0;
    for (int64_t n : counts) total += n;
    auto bits = splitInProportion(8 * static_cast<uint64_t>(packedBytes(total, format_.bits())), counts);
    for (size_t i = 0; i < counts.size(); ++i) bits[i] += 32 * static_cast<uint64_t>(groupCount(counts[i], group_));
    return bits;
  }

 private:
  struct Layout {
    int64_t header = 0;  // bytes of multipliers
    int64_t elements = 0;
  };

  Layout layoutOf(const std::vector<at::Tensor>& tensors) const {
    Layout layout;
    for (const auto& t : tensors) {
      layout.header += 4 * groupCount(t.numel(), group_);
      layout.elements += t.numel();
    }
    return layout;
  }

  int64_t groupSize(int64_t n) const { return group_ == 0 ? n : group_; }

  // max_finite / amax in float32, amax taken over the bit patterns of |x| (NaN above infinity, so
  // a NaN anywhere makes it NaN); 1 where the quotient is infinite (amax 0 or tiny).
  float multiplierOf(const float* x, int64_t size) const {
    uint32_t largest = 0;
    for (int64_t j = 0; j < size; ++j) {
      uint32_t bits;
      std::memcpy(&bits, x + j, sizeof(bits));
      largest = std::max(largest, bits & 0x7FFFFFFFu);
    }
    float amax;
    std::memcpy(&amax, &largest, sizeof(amax));
    const float m = largest_ / amax;
    return std::isinf(m) ? 1.0f : m;
  }

  // Two 4-bit codes a byte, the first in the low nibble; an odd count leaves the high nibble 0.
  static void packNibbles(const uint8_t* codes, int64_t count, at::Tensor& message, int64_t offset) {
    uint8_t* out = message.data_ptr<uint8_t>() + offset;
    for (int64_t i = 0; i + 1 < count; i += 2) out[i >> 1] = static_cast<uint8_t>(codes[i] | codes[i + 1] << 4);
    if (count % 2 == 1) out[count >> 1] = codes[count - 1];
  }

  const Minifloat format_;
  const Encoder encode_;
  const float largest_;
  const int64_t group_;
  std::vector<float> table_;  // decode(code) for every code
  at::Tensor codes_;          // 4-bit codes before packing, kept between calls
};

}  // namespace

std::unique_ptr<GradientCodec> makeMinifloatCodec(const Minifloat& format, int64_t group) {
  return std::make_unique<MinifloatCodec>(format, group);
}

}  // namespace gcrun::reducers
