#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hyperparams/settings.h"
#include "reducers/quantized_reducer.h"

namespace gcrun::reducers {

// A floating-point format narrower than float16: a sign bit, `exponent_bits` exponent bits with
// bias `bias`, and `mantissa_bits` mantissa bits, IEEE-style: exponent field 0 holds the subnormals
// (m * 2^(1 - bias - M)) and zero, field e > 0 the normals (1 + m / 2^M) * 2^(e - bias). What the
// top of the range holds is the format's own (`Top`).
struct Minifloat {
  enum class Top {
    finite,    // every code is a number (E3M0: no inf, no NaN)
    nan_only,  // S.1111.111 is NaN, the rest finite (OCP E4M3 "FN": max 448, no inf)
    ieee,      // the largest exponent field is inf (mantissa 0) or NaN (E5M2: max 57344)
  };
  int exponent_bits;
  int mantissa_bits;
  int bias;
  Top top;

  int bits() const { return 1 + exponent_bits + mantissa_bits; }
  // The largest finite magnitude's code (sign bit clear), and its value.
  uint32_t maxFiniteCode() const;
  float maxFinite() const { return decode(maxFiniteCode()); }
  // The code's value, exactly (every value of these formats is a float32).
  float decode(uint32_t code) const;
  // `value` rounded to the nearest representable value, ties to the even code (the one whose lowest
  // bit is 0), saturating: a magnitude beyond the largest finite one, infinity included, becomes
  // that one with the value's sign. NaN becomes the NaN code with NaN's sign (0x7F / 0xFF for E4M3
  // and E5M2), or a zero in a format without NaN. Negative zero keeps its sign.
  uint32_t encode(float value) const;
};

// OCP 8-bit floats (OFP8, 2023): E4M3 in its FN variant (bias 7, max 448, NaN S.1111.111, no inf)
// and E5M2 (bias 15, max 57344, inf and NaN as in IEEE 754).
Minifloat e4m3();
Minifloat e5m2();
// Streaming DiLoCo's 4-bit float: a sign and a 3-bit exponent (bias 3), no mantissa. Field 0 is
// zero (a subnormal with no mantissa bits), fields 1..7 are 2^-2 .. 2^4, and nothing is inf or NaN:
// magnitudes {0, 1/4, 1/2, 1, 2, 4, 8, 16}.
Minifloat e3m0();

// The scaling settings fp8 and fp4 share, one key and one meaning: reducer.scale (tensor | block)
// and reducer.scale_block, bound to two fields of the reducer's own options struct.
template <class Options>
hyperparams::SettingsSchema<Options> withGroupScaling(const hyperparams::SettingsSchema<Options>& schema,
                                                      std::string Options::*scale, int64_t Options::*block) {
  return schema
      .add(scale, "scale", hyperparams::oneOf({"tensor", "block"}),
           "fp8, fp4: one float32 scale per tensor, or per reducer.scale_block elements.")
      .add(block, "scale_block", hyperparams::integerAtLeast(1),
           "fp8, fp4: elements per scale when reducer.scale is block.");
}

// Elements per scale: the block, or 0 for one per tensor.
inline int64_t groupOf(const std::string& scale, int64_t block) { return scale == "tensor" ? 0 : block; }

// The codec of fp8 and fp4: each tensor is cut into groups of `group` elements (the last one
// shorter; group 0: the whole tensor is one group) and each group scaled by its own float32
// multiplier m = max_finite / amax, amax its largest magnitude, as torchft's FP8 quantizer does
// (m = 1 where that is infinite: an all-zero group). An element x is sent as encode(x * m) and
// read back as decode(code) / m, both in float32. A group holding a NaN has m = NaN and one holding
// an infinity m = 0, so every element of it decodes to NaN: the run's non-finite check sees it.
// Message: the float32 multipliers of every group of every tensor in order (native byte order),
// then every element's code in order, packed by packBits' layout (8-bit codes one per byte, 4-bit
// codes two per byte, low nibble first, the last byte zero-padded). Empty tensors send nothing.
std::unique_ptr<GradientCodec> makeMinifloatCodec(const Minifloat& format, int64_t group);

// How many groups of `group` elements (0: one per non-empty tensor) a tensor of n elements has.
inline int64_t groupCount(int64_t n, int64_t group) { return n == 0 ? 0 : group == 0 ? 1 : (n + group - 1) / group; }

}  // namespace gcrun::reducers
