#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include <ATen/ATen.h>

#include "reducers/builtin_reducers.h"
#include "reducers/generator_state.h"
#include "reducers/quantized_reducer.h"

namespace gcrun::reducers {
namespace {

// TernGrad (Wen et al., 2017) per tensor: scale = max_i |g_i|, and each element becomes
// scale * sign(g_i) with probability |g_i| / scale, else 0 (u_i ~ U[0, 1) from this worker's own
// generator), so the expectation is g. The scale is this worker's own (the paper's shared maximum
// needs an extra collective; GRACE's issue #14 reports it hurt). No gradient clipping.
// Message (one uint8 tensor, all-gathered): the T per-tensor float32 scales (4T bytes, native
// order), then every element in order as a 2-bit field packed by packBits: 0 zero, 1 +scale,
// 2 -scale. 4T + ceil(2N / 8) bytes in all.
// Memory = g - Q(g): zero-mean noise that error feedback (if on) adds back next step.
class TernGradCodec : public GradientCodec {
 public:
  explicit TernGradCodec(at::Generator generator) : generator_(std::move(generator)) {}

  at::Tensor encode(const std::vector<at::Tensor>& tensors) override {
    return encodeScaledCodes(tensors, generator_, kFieldBits, Quantizer{}, uniform_);
  }

  void decode(const at::Tensor& message, const std::vector<at::Tensor>& tensors) const override {
    const auto ternary = [](uint64_t code) { return code == 1 ? 1.0f : code == 2 ? -1.0f : 0.0f; };
    decodeScaledCodes(message, tensors, kFieldBits, ternary);
  }

  std::vector<uint64_t> bitsByTensor(const std::vector<int64_t>& counts) const override {
    return scaledCodesBits(counts, kFieldBits);
  }

  void saveState(Reducer::State& state) const override { saveGenerator(state, "generator", generator_); }
  void loadState(const Reducer::State& state) override { loadGenerator(state, "terngrad", "generator", generator_); }

  static constexpr int64_t kFieldBits = 2;

 private:
  // Kept with probability |g| / max(scale, FLT_MIN): the float32 operations of the tensor ops this
  // replaced (tests/reducers/fused_codecs_test keeps them).
  struct Quantizer {
    // max |g_i| (NaN if any is), as g.abs().max() but without its temporary: a maximum does not
    // depend on the order it is taken in. Taken over the bit patterns of |g_i|, which order
    // non-negative floats as their values do and put NaNs above infinity.
    float scale(const at::Tensor& g) const {
      const CpuFloats values(g);
      const auto* x = reinterpret_cast<const uint32_t*>(values.data());
      uint32_t largest = 0;
      for (int64_t j = 0; j < g.numel(); ++j) largest = std::max(largest, x[j] & 0x7FFFFFFFu);
      if (largest > 0x7F800000u) return std::numeric_limits<float>::quiet_NaN();
      float magnitude;
      std::memcpy(&magnitude, &largest, sizeof(magnitude));
      return magnitude;
    }
    uint32_t code(float x, float u, float scale) const {
      const float probability = std::fabs(x) / std::max(scale, std::numeric_limits<float>::min());
      return static_cast<uint32_t>(u < probability) * (1u + static_cast<uint32_t>(x < 0));
    }
  };

  at::Generator generator_;
  at::Tensor uniform_;  // encodeScaledCodes' scratch for the draws
};

}  // namespace

ReducerSpec ternGradSpec() {
  const auto make = [](const ReducerContext& context) {
    return makeAllGatherReducer(context.comm,
                                std::make_unique<TernGradCodec>(workerGenerator(context.seed, context.comm.rank())));
  };
  ReducerSpec spec{
      make, CollectiveKind::all_gather, {}, true, {Granularity::layer, Granularity::model, Granularity::bucket}, ""};
  spec.contractive = false;
  // The scales and the 2-bit codes of all the tensors, packed as one message (bitsByTensor()).
  spec.planned_bits = [](const ReducerOptions& /*options*/, const TensorShapes& shapes) {
    return scaledCodesPlannedBits(shapes, TernGradCodec::kFieldBits);
  };
  spec.whole_step = true;
  return spec;
}

}  // namespace gcrun::reducers
