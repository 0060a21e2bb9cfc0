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
    int64_t count = 0;
    for (const auto& t : tensors) count += t.numel();
    if (tensors.empty()) return at::empty({0}, at::kByte);
    const auto options = tensors.front().options();
    auto uniform = at::rand({count}, generator_, at::TensorOptions().dtype(at::kFloat)).to(options.device());
    auto scales = at::zeros({static_cast<int64_t>(tensors.size())}, options);
    auto codes = at::empty({count}, options.dtype(at::kLong));
    int64_t offset = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
      const auto& g = tensors[i];
      const int64_t n = g.numel();
      if (n == 0) continue;
      auto scale = scales[i];
      scale.copy_(g.abs().max());
      // An all-zero tensor has scale 0 and sends only zeros; the clamp only avoids 0/0.
      auto probability = g.abs().div_(scale.clamp_min(std::numeric_limits<float>::min()));
      auto kept = uniform.narrow(0, offset, n).lt(probability).to(at::kLong);
      codes.narrow(0, offset, n).copy_(kept.mul_(g.lt(0).to(at::kLong).add_(1)));
      offset += n;
    }
    return at::cat({floatsAsBytes(scales), packBits(codes, kFieldBits)});
  }

  void decode(const at::Tensor& message, const std::vector<at::Tensor>& tensors) const override {
    const int64_t header = 4 * static_cast<int64_t>(tensors.size());
    int64_t count = 0;
    for (const auto& t : tensors) count += t.numel();
    const auto scales = bytesAsFloats(message.narrow(0, 0, header));
    const auto codes = unpackBits(message.narrow(0, header, message.numel() - header), count, kFieldBits);
    const auto ternary = codes.eq(1).to(at::kFloat).sub_(codes.eq(2).to(at::kFloat));
    int64_t offset = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
      const int64_t n = tensors[i].numel();
      auto target = tensors[i];
      at::mul_out(target, ternary.narrow(0, offset, n), scales[i]);
      offset += n;
    }
  }

  void saveState(Reducer::State& state) const override { saveGenerator(state, "generator", generator_); }
  void loadState(const Reducer::State& state) override { loadGenerator(state, "terngrad", "generator", generator_); }

 private:
  static constexpr int64_t kFieldBits = 2;
  at::Generator generator_;
};

}  // namespace

std::unique_ptr<Reducer> makeTernGradReducer(const ReducerContext& context) {
  return makeAllGatherReducer(context.comm,
                              std::make_unique<TernGradCodec>(workerGenerator(context.seed, context.comm.rank())));
}

}  // namespace gcrun::reducers
