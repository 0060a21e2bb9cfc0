#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include <ATen/ATen.h>

#include "reducers/builtin_reducers.h"
#include "reducers/int8_codec.h"
#include "reducers/quantized_reducer.h"
#include "reducers/tensor_buffer.h"
#include "reducers/tensor_costs.h"

namespace gcrun::reducers {

MinMax minMaxOf(const float* x, int64_t n) {
  float low = std::numeric_limits<float>::infinity(), high = -low;
  bool nan = false;
  for (int64_t j = 0; j < n; ++j) {
    low = std::min(low, x[j]);
    high = std::max(high, x[j]);
    nan |= std::isnan(x[j]);
  }
  if (nan) low = high = std::numeric_limits<float>::quiet_NaN();
  return {low, high};
}

void encodeMinMax(const float* x, int64_t n, MinMax range, uint8_t* codes) {
  const float width = range.max - range.min;
  // A constant tensor (width 0) and a non-finite one send code 0 everywhere: the first decodes to
  // min exactly, the second to NaN (min + 0 * inf, or NaN itself).
  if (!(width > 0.0f) || !std::isfinite(width)) {
    std::fill(codes, codes + n, uint8_t{0});
    return;
  }
  // The level is in [0, 255]: adding and taking away 2^23 rounds it to an integer, half to even,
  // in float32 (nearbyint's rounding, but a loop of it vectorizes).
  for (int64_t j = 0; j < n; ++j) {
    const float level = ((x[j] - range.min) / width * 255.0f + 0x1p23f) - 0x1p23f;
    codes[j] = static_cast<uint8_t>(std::min(level, 255.0f));
  }
}

void decodeMinMax(const uint8_t* codes, int64_t n, MinMax range, float* out) {
  const float step = (range.max - range.min) / 255.0f;
  for (int64_t j = 0; j < n; ++j) out[j] = range.min + static_cast<float>(codes[j]) * step;
}

namespace {

// Message: per non-empty tensor its float32 min and max (8 bytes, native order), then every
// element's uint8 code in order.
class MinMaxCodec : public GradientCodec {
 public:
  at::Tensor encode(const std::vector<at::Tensor>& tensors) override {
    int64_t header = 0, elements = 0;
    for (const auto& t : tensors) {
      header += t.numel() > 0 ? 8 : 0;
      elements += t.numel();
    }
    auto message = at::empty({header + elements}, at::kByte);
    auto* ranges = reinterpret_cast<float*>(message.data_ptr<uint8_t>());
    uint8_t* codes = message.data_ptr<uint8_t>() + header;
    for (const auto& t : tensors) {
      if (t.numel() == 0) continue;
      const CpuFloats values(t);
      const MinMax range = minMaxOf(values.data(), t.numel());
      *ranges++ = range.min;
      *ranges++ = range.max;
      encodeMinMax(values.data(), t.numel(), range, codes);
      codes += t.numel();
    }
    return message.to(tensors.empty() ? at::kCPU : tensors.front().device());
  }

  void decode(const at::Tensor& message, const std::vector<at::Tensor>& tensors) const override {
    const auto bytes = message.to(at::kCPU).contiguous();
    int64_t header = 0;
    for (const auto& t : tensors) header += t.numel() > 0 ? 8 : 0;
    const auto ranges = bytesAsFloats(bytes.narrow(0, 0, header));
    const float* range = ranges.data_ptr<float>();
    const uint8_t* codes = bytes.data_ptr<uint8_t>() + header;
    for (const auto& t : tensors) {
      if (t.numel() == 0) continue;
      const CpuFloats target(t);
      decodeMinMax(codes, t.numel(), {range[0], range[1]}, target.data());
      target.writeBack();
      range += 2;
      codes += t.numel();
    }
  }

  // 8 bits an element and 64 for each non-empty tensor's min and max.
  std::vector<uint64_t> bitsByTensor(const std::vector<int64_t>& counts) const override {
    std::vector<uint64_t> bits;
    for (int64_t n : counts) bits.push_back(n > 0 ? 64 + 8 * static_cast<uint64_t>(n) : 0);
    return bits;
  }
};

}  // namespace

// INTELLECT-1's pseudo-gradient compression (arXiv 2412.01152; prime's MinMaxUInt8, as Bagua's):
// per tensor, q = round((x - min) / (max - min) * 255) in float32, rounded half to even
// (nearbyint), min and max sent as float32; decoded as min + q * ((max - min) / 255). INTELLECT-1
// reduces in a ring that dequantizes, adds in float32 and re-quantizes at every hop; gcrun
// all-gathers every worker's codes once and each worker decodes and adds them in float32 in rank
// order (one quantization, of what each worker sent). Memory = send - decode(own codes).
ReducerSpec int8Spec() {
  const auto make = [](const ReducerContext& context) {
    return makeAllGatherReducer(context.comm, std::make_unique<MinMaxCodec>());
  };
  ReducerSpec spec{
      make, CollectiveKind::all_gather, {}, true, {Granularity::layer, Granularity::model, Granularity::bucket}, ""};
  spec.planned_bits = int8PlannedBits;
  return spec;
}

uint64_t int8PlannedBits(const ReducerOptions& /*options*/, const TensorShapes& shapes) {
  return codecPlannedBits(MinMaxCodec(), shapes);
}

}  // namespace gcrun::reducers
