#pragma once

#include <cstdint>

namespace gcrun::reducers {

// The int8 reducer's min-max uint8 quantizer (reducers/int8_reducer.cpp), element by element.
struct MinMax {
  float min;
  float max;
};

// The smallest and largest of x[0..n); both NaN if any element is NaN; (inf, -inf) if n is 0.
MinMax minMaxOf(const float* x, int64_t n);
// codes[j] = round((x[j] - min) / (max - min) * 255), ties to even, in float32; every code 0 when
// max - min is 0 (a constant tensor) or not finite.
void encodeMinMax(const float* x, int64_t n, MinMax range, uint8_t* codes);
// out[j] = min + codes[j] * ((max - min) / 255), in float32.
void decodeMinMax(const uint8_t* codes, int64_t n, MinMax range, float* out);

}  // namespace gcrun::reducers
