#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include <ATen/ATen.h>

#include "reducers/builtin_reducers.h"
#include "reducers/generator_state.h"
#include "reducers/quantized_reducer.h"

namespace gcrun::reducers {
namespace {

struct QsgdOptions {
  int64_t quantization_levels = 256;
};

const hyperparams::SettingsSchema<QsgdOptions>& qsgdSettings() {
  static const auto schema = hyperparams::SettingsSchema<QsgdOptions>().add(
      &QsgdOptions::quantization_levels, "quantization_levels", hyperparams::integerAtLeast(1),
      "QSGD's number of quantization levels s.");
  return schema;
}

// The smallest L with 2^L >= s + 1: levels 0..s.
int64_t qsgdLevelBits(int64_t levels) {
  int64_t bits = 0;
  while ((int64_t{1} << bits) < levels + 1) ++bits;
  return bits;
}

// QSGD (Alistarh et al., 2017) with s = reducer.quantization_levels levels, one norm per tensor
// (GRACE's torch flavour; its dist flavour uses 128-element buckets):
//   level_i = floor(s * |g_i| / ||g||_2 + u_i), u_i ~ U[0, 1) from this worker's own generator,
//   Q(g)_i  = ||g||_2 * sign(g_i) * level_i / s,
// so E[level_i] = s * |g_i| / ||g||_2 and Q is unbiased. Levels need L = ceil(log2(s + 1)) bits
// and each element b = L + 1 (GRACE sends one int8 per element instead).
// Message (one uint8 tensor, all-gathered): the T per-tensor float32 norms (4T bytes, native
// order), then every element of every tensor in order as a b-bit field packed by packBits, with
// bit 0 the sign (1: negative) and bits 1..L the level: 4T + ceil(N * b / 8) bytes in all.
// Memory = g - Q(g): zero-mean noise that error feedback (if on) adds back next step.
class QsgdCodec : public GradientCodec {
 public:
  QsgdCodec(int64_t levels, at::Generator generator)
      : levels_(levels), field_bits_(qsgdLevelBits(levels) + 1), generator_(std::move(generator)) {}

  at::Tensor encode(const std::vector<at::Tensor>& tensors) override {
    return encodeScaledCodes(tensors, generator_, field_bits_,
                             Quantizer{static_cast<float>(levels_), static_cast<int64_t>(static_cast<float>(levels_))},
                             uniform_);
  }

  void decode(const at::Tensor& message, const std::vector<at::Tensor>& tensors) const override {
    // sign * level, in units of norm / s.
    const auto signed_level = [](uint64_t code) {
      const auto level = static_cast<int64_t>(code >> 1);
      return static_cast<float>((code & 1) != 0 ? -level : level);
    };
    decodeScaledCodes(message, tensors, field_bits_, signed_level, static_cast<double>(levels_));
  }

  std::vector<uint64_t> bitsByTensor(const std::vector<int64_t>& counts) const override {
    return scaledCodesBits(counts, field_bits_);
  }

  void saveState(Reducer::State& state) const override { saveGenerator(state, "generator", generator_); }
  void loadState(const Reducer::State& state) override { loadGenerator(state, "qsgd", "generator", generator_); }

 private:
  // The float32 operations, in order, of the tensor ops this replaced (tests/reducers/fused_codecs_test
  // keeps them): |g| / max(norm, FLT_MIN) * s + u, floored, at most s. The sum is >= 0, so
  // truncating to an integer floors it, and clamping the integer to float(s) is clamping the float.
  struct Quantizer {
    float levels;
    int64_t max_level;
    float scale(const at::Tensor& g) const { return g.norm().item<float>(); }
    uint64_t code(float x, float u, float norm) const {
      const float scaled = std::fabs(x) / std::max(norm, std::numeric_limits<float>::min()) * levels;
      const int64_t level = std::min(static_cast<int64_t>(scaled + u), max_level);
      return static_cast<uint64_t>(2 * level + (x < 0 ? 1 : 0));
    }
  };

  const int64_t levels_;
  const int64_t field_bits_;
  at::Generator generator_;
  at::Tensor uniform_;  // encodeScaledCodes' scratch for the draws
};

}  // namespace

ReducerSpec qsgdSpec() {
  const auto make = [](const ReducerContext& context) {
    return makeAllGatherReducer(
        context.comm, std::make_unique<QsgdCodec>(qsgdSettings().read(context.options.settings).quantization_levels,
                                                  workerGenerator(context.seed, context.comm.rank())));
  };
  ReducerSpec spec{make,
                   CollectiveKind::all_gather,
                   qsgdSettings().specs(),
                   true,
                   {Granularity::layer, Granularity::model, Granularity::bucket},
                   ""};
  spec.contractive = false;
  // The norms and the (L + 1)-bit codes of all the tensors, packed as one message (bitsByTensor()).
  spec.planned_bits = [](const ReducerOptions& options, const TensorShapes& shapes) {
    return scaledCodesPlannedBits(shapes, qsgdLevelBits(qsgdSettings().read(options.settings).quantization_levels) + 1);
  };
  spec.whole_step = true;
  return spec;
}

}  // namespace gcrun::reducers
