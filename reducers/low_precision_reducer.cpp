#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <ATen/ATen.h>

#include "reducers/builtin_reducers.h"
#include "reducers/tensor_buffer.h"

namespace gcrun::reducers {
namespace {

// Horovod's FP16Compressor and DDP's fp16/bf16_compress_hook: every tensor cast to a 16-bit type
// and flat-packed into one all-reduce, then cast back. Each worker divides by W *before* casting
// (Horovod's gradient_predivide_factor, DDP's divide-first), so the sum on the wire is already the
// average and cannot overflow where the average does not: fp16 tops out at 65504.
// Memory = g - W * cast(g / W): the rounding this worker's contribution lost, so error feedback
// can carry it. The rounding of the 16-bit sum itself is nobody's contribution and is not kept.
// Bits = 16 N.
// A backend that cannot sum the type (LibTorch 1.13's Gloo has no bfloat16 sum; later ones and
// NCCL do) gets the same 16-bit payload by all-gather instead, as raw bytes, and every worker adds
// the W payloads in float32 in rank order: the same bits sent, one rounding fewer.
class LowPrecisionReducer : public Reducer {
 public:
  LowPrecisionReducer(Communicator& comm, at::ScalarType wire_type) : comm_(comm), wire_type_(wire_type) {}

  uint64_t reduce(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& out,
                  const std::vector<at::Tensor>& memory) override {
    if (!allocated_) allocate(send);
    const int world = comm_.size();
    // A one-rank sum is its input: the output is the cast itself, written in the same pass.
    const bool alone = world == 1;
    for (size_t i = 0; i < send.size(); ++i) {
      const at::Tensor* delivered = alone ? &out[i] : nullptr;
      if (wire_type_ == at::kHalf) {
        castWithError<at::Half>(send[i], i, memory[i], delivered, world);
      } else {
        castWithError<at::BFloat16>(send[i], i, memory[i], delivered, world);
      }
    }
    // Gloo can hang on empty tensors; only a model without elements sends nothing.
    if (wire_.numel() == 0) return 0;
    if (backend_sums_) {
      comm_.allreduceSum(wire_.flat());
      if (!alone) wire_.unpack(out);
    } else {
      sum_.flat().zero_();
      for (const auto& bytes : comm_.allgather(wire_.flat().view(at::kByte))) {
        sum_.flat().add_(bytes.view(wire_type_));
      }
      sum_.unpack(out);
    }
    return bitsOf(wire_.flat());
  }

 private:
  // One pass per tensor: x = g / W, its 16-bit cast onto the wire, and memory = (x - cast) * W,
  // the float32 operations of the whole-tensor version it replaced, in the same order; and, if
  // `delivered` is given, the cast back to float32 into it.
  template <class Wire>
  void castWithError(const at::Tensor& send, size_t i, const at::Tensor& memory, const at::Tensor* delivered,
                     int world) {
    const CpuFloats g(send);
    const CpuFloats error(memory);
    const CpuFloats back(delivered != nullptr ? *delivered : at::empty({0}));
    float* out = delivered != nullptr ? back.data() : nullptr;
    auto* cast = static_cast<Wire*>(wire_.slice(i).data_ptr());
    const auto w = static_cast<float>(world);
    int64_t done = 0;
    if constexpr (std::is_same_v<Wire, at::Half>) {
      if (hasF16c()) done = castHalfF16c(g.data(), send.numel(), w, cast, error.data(), out);
    } else {
      done = out != nullptr ? castBFloat16<true>(g.data(), send.numel(), w, cast, error.data(), out)
                            : castBFloat16<false>(g.data(), send.numel(), w, cast, error.data(), out);
    }
    castScalar(g.data() + done, send.numel() - done, w, cast + done, error.data() + done,
               out != nullptr ? out + done : nullptr);
    error.writeBack();
    if (delivered != nullptr) back.writeBack();
  }

  template <class Wire>
  static void castScalar(const float* x, int64_t n, float world, Wire* cast, float* lost, float* out) {
    for (int64_t j = 0; j < n; ++j) {
      const float scaled = x[j] / world;
      cast[j] = static_cast<Wire>(scaled);
      const auto back = static_cast<float>(cast[j]);
      lost[j] = (scaled - back) * world;
      if (out != nullptr) out[j] = back;
    }
  }

  // c10::BFloat16's round to nearest even (NaN: 0x7FC0) spelled out on the bits, so that the loop
  // vectorizes. Returns how many elements it did: all.
  template <bool kDeliver>
  static int64_t castBFloat16(const float* x, int64_t n, float world, at::BFloat16* cast, float* lost, float* out) {
    auto* bits16 = reinterpret_cast<uint16_t*>(cast);
    for (int64_t j = 0; j < n; ++j) {
      const float scaled = x[j] / world;
      uint32_t bits;
      std::memcpy(&bits, &scaled, sizeof(bits));
      const uint32_t rounded = std::isnan(scaled) ? 0x7FC0u : (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
      bits16[j] = static_cast<uint16_t>(rounded);
      const uint32_t widened = rounded << 16;
      float back;
      std::memcpy(&back, &widened, sizeof(back));
      lost[j] = (scaled - back) * world;
      if constexpr (kDeliver) out[j] = back;
    }
    return n;
  }

  static bool hasF16c() {
    static const bool has = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
    return has;
  }

  // Eight elements at a time with the F16C conversions, which round to nearest even as c10::Half
  // does; a group holding a NaN (whose payload the two treat differently) stops here, and the
  // scalar loop takes over from it. Returns how many elements it did.
  __attribute__((target("avx,f16c"))) static int64_t castHalfF16c(const float* x, int64_t n, float world,
                                                                  at::Half* cast, float* lost, float* out) {
    const __m256 w = _mm256_set1_ps(world);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
      const __m256 scaled = _mm256_div_ps(_mm256_loadu_ps(x + j), w);
      if (_mm256_movemask_ps(_mm256_cmp_ps(scaled, scaled, _CMP_UNORD_Q)) != 0) break;
      const __m128i half = _mm256_cvtps_ph(scaled, _MM_FROUND_TO_NEAREST_INT);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(cast + j), half);
      const __m256 back = _mm256_cvtph_ps(half);
      _mm256_storeu_ps(lost + j, _mm256_mul_ps(_mm256_sub_ps(scaled, back), w));
      if (out != nullptr) _mm256_storeu_ps(out + j, back);
    }
    return j;
  }

  void allocate(const std::vector<at::Tensor>& like) {
    std::vector<at::Tensor> wire, sum;
    for (const auto& t : like) {
      wire.push_back(at::empty({t.numel()}, t.options().dtype(wire_type_)));
      sum.push_back(at::empty({t.numel()}, t.options().dtype(at::kFloat)));
    }
    wire_ = TensorBuffer(wire);
    if (wire_.numel() > 0) {
      backend_sums_ = backendSums(wire_.flat().device());
      if (!backend_sums_) sum_ = TensorBuffer(sum);
    }
    allocated_ = true;
  }

  // Probed once with a one-element all-reduce, which a backend without the type refuses before
  // sending anything, identically on every rank.
  bool backendSums(at::Device device) {
    auto probe = at::zeros({1}, at::TensorOptions().dtype(wire_type_).device(device));
    try {
      comm_.allreduceSum(probe);
      return true;
    } catch (const c10::Error&) {
      return false;
    }
  }

  Communicator& comm_;
  const at::ScalarType wire_type_;
  bool allocated_ = false;
  bool backend_sums_ = true;
  TensorBuffer wire_;
  TensorBuffer sum_;  // float32 sum of the gathered payloads when the backend cannot sum
};

}  // namespace

ReducerSpec fp16Spec() {
  const auto make = [](const ReducerContext& context) -> std::unique_ptr<Reducer> {
    return std::make_unique<LowPrecisionReducer>(context.comm, at::kHalf);
  };
  return {make, "all-reduce", {}, true, {Granularity::layer, Granularity::model, Granularity::bucket}, ""};
}

ReducerSpec bf16Spec() {
  const auto make = [](const ReducerContext& context) -> std::unique_ptr<Reducer> {
    return std::make_unique<LowPrecisionReducer>(context.comm, at::kBFloat16);
  };
  return {make, "all-reduce", {}, true, {Granularity::layer, Granularity::model, Granularity::bucket}, ""};
}

}  // namespace gcrun::reducers
