#include <immintrin.h>

#include <algorithm>
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
// the W payloads in float32 in rank order: the same bits sent, one rounding fewer. float16 between
// 2 workers is all-gathered too (see reduce()), as float16, with Gloo's rounding of the sum kept.
// The casts are fused raw loops (F16C where the CPU has it) that round exactly as c10's casts do;
// tests/reducers/fused_codecs_test keeps the whole-tensor version they replaced.
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
    // Gloo sums float16 one element at a time in software, slower than the exact all-reduce of
    // twice the bytes; between 2 workers that sum is one rounded addition, so all-gathering the
    // payloads and adding them here gives the same bits (the same bytes on the wire, too).
    const bool gather = !backend_sums_ || (world == 2 && wire_type_ == at::kHalf);
    if (!gather) {
      comm_.allreduceSum(wire_.flat());
      if (!alone) wire_.unpack(out);
    } else {
      // float16 travels as itself, so that a trace records the sum it stands for (every backend
      // gathers it); bfloat16 as raw bytes, since LibTorch 1.13's Gloo gathers no bfloat16.
      const auto payloads = comm_.allgather(wire_type_ == at::kHalf ? wire_.flat() : wire_.flat().view(at::kByte));
      if (backend_sums_) {
        addAsGlooDoes(payloads, out);
      } else {
        addInFloat(payloads, out);
      }
    }
    return bitsOf(wire_.flat());
  }

  // A tensor travels whole, at 16 bits an element.
  std::vector<TensorCost> lastCosts() const override {
    const auto element_bits = static_cast<uint64_t>(8 * wire_.flat().element_size());
    std::vector<TensorCost> costs;
    for (size_t i = 0; i < wire_.count(); ++i)
      costs.push_back({element_bits * static_cast<uint64_t>(wire_.slice(i).numel()), 0});
    return costs;
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

  // What a backend without the type gets: the payloads added in float32 in rank order from zero;
  // between 2 workers in one pass over the output.
  void addInFloat(const std::vector<at::Tensor>& payloads, const std::vector<at::Tensor>& out) const {
    if (wire_type_ == at::kHalf) {
      addWidened<at::Half>(payloads, out);
    } else {
      addWidened<uint16_t>(payloads, out);
    }
  }

  // Wire is at::Half, or uint16_t for bfloat16's bits.
  template <class Wire>
  static void addWidened(const std::vector<at::Tensor>& payloads, const std::vector<at::Tensor>& out) {
    const auto widen = [](Wire value) {
      if constexpr (std::is_same_v<Wire, at::Half>) {
        return static_cast<float>(value);
      } else {
        return wideFloat(value);
      }
    };
    std::vector<const Wire*> wires;
    for (const auto& payload : payloads) wires.push_back(static_cast<const Wire*>(payload.data_ptr()));
    int64_t offset = 0;
    for (const auto& o : out) {
      const CpuFloats total(o);
      float* sum = total.data();
      const int64_t n = o.numel();
      if (wires.size() == 2) {
        const Wire* first = wires[0] + offset;
        const Wire* second = wires[1] + offset;
        for (int64_t j = 0; j < n; ++j) sum[j] = (0.0f + widen(first[j])) + widen(second[j]);
      } else {
        std::fill(sum, sum + n, 0.0f);
        for (const Wire* wire : wires) {
          for (int64_t j = 0; j < n; ++j) sum[j] += widen(wire[offset + j]);
        }
      }
      total.writeBack();
      offset += n;
    }
  }

  // 2 workers' float16 payloads added as Gloo's float16 sum does: in float32, rounded to nearest
  // even float16 (a NaN becomes 0x7FFF), then widened for the output.
  void addAsGlooDoes(const std::vector<at::Tensor>& payloads, const std::vector<at::Tensor>& out) const {
    const auto* first = static_cast<const at::Half*>(payloads[0].data_ptr());
    const auto* second = static_cast<const at::Half*>(payloads[1].data_ptr());
    int64_t offset = 0;
    for (const auto& o : out) {
      const CpuFloats total(o);
      const int64_t n = o.numel();
      const int64_t done = hasF16c() ? addHalvesF16c(first + offset, second + offset, n, total.data()) : 0;
      for (int64_t j = done; j < n; ++j) {
        const float sum = static_cast<float>(first[offset + j]) + static_cast<float>(second[offset + j]);
        total.data()[j] = std::isnan(sum) ? static_cast<float>(c10::Half(0x7FFF, c10::Half::from_bits()))
                                          : static_cast<float>(static_cast<at::Half>(sum));
      }
      total.writeBack();
      offset += n;
    }
  }

  // Eight at a time until a group whose sum holds a NaN (returns how many it did).
  __attribute__((target("avx,f16c"))) static int64_t addHalvesF16c(const at::Half* a, const at::Half* b, int64_t n,
                                                                   float* out) {
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
      const __m256 sum = _mm256_add_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + j))),
                                       _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + j))));
      if (_mm256_movemask_ps(_mm256_cmp_ps(sum, sum, _CMP_UNORD_Q)) != 0) break;
      _mm256_storeu_ps(out + j, _mm256_cvtph_ps(_mm256_cvtps_ph(sum, _MM_FROUND_TO_NEAREST_INT)));
    }
    return j;
  }

  static float wideFloat(uint16_t bfloat16_bits) {
    const uint32_t widened = static_cast<uint32_t>(bfloat16_bits) << 16;
    float value;
    std::memcpy(&value, &widened, sizeof(value));
    return value;
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
    std::vector<at::Tensor> wire;
    for (const auto& t : like) wire.push_back(at::empty({t.numel()}, t.options().dtype(wire_type_)));
    wire_ = TensorBuffer(wire);
    if (wire_.numel() > 0) backend_sums_ = backendSums(wire_.flat().device());
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
};

}  // namespace

ReducerSpec fp16Spec() {
  const auto make = [](const ReducerContext& context) -> std::unique_ptr<Reducer> {
    return std::make_unique<LowPrecisionReducer>(context.comm, at::kHalf);
  };
  ReducerSpec spec{
      make,  CollectiveKind::all_reduce, {}, true, {Granularity::layer, Granularity::model, Granularity::bucket}, "",
      false, Baseline::half_precision};
  spec.planned_bits = fp16PlannedBits;
  spec.summed_in = DataType::float16;
  return spec;
}

ReducerSpec bf16Spec() {
  const auto make = [](const ReducerContext& context) -> std::unique_ptr<Reducer> {
    return std::make_unique<LowPrecisionReducer>(context.comm, at::kBFloat16);
  };
  ReducerSpec spec{
      make, CollectiveKind::all_reduce, {}, true, {Granularity::layer, Granularity::model, Granularity::bucket}, ""};
  spec.planned_bits = bf16PlannedBits;
  spec.summed_in = DataType::bfloat16;
  return spec;
}

// A tensor travels whole, at 16 bits an element (lastCosts()).
uint64_t fp16PlannedBits(const ReducerOptions& /*options*/, const TensorShapes& shapes) {
  uint64_t bits = 0;
  for (const auto& shape : shapes) bits += 8 * sizeof(at::Half) * elementCount(shape);
  return bits;
}

uint64_t bf16PlannedBits(const ReducerOptions& options, const TensorShapes& shapes) {
  return fp16PlannedBits(options, shapes);
}

}  // namespace gcrun::reducers
