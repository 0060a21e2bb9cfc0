#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/ATen.h>

#include "reducers/bit_stream.h"
#include "reducers/reducer.h"
#include "reducers/tensor_buffer.h"

namespace gcrun::reducers {

// How a quantizer that cannot be summed on the wire (qsgd, terngrad) turns this worker's gradient
// into one byte message and any worker's message back into a gradient. Messages travel by one
// all-gather, so every worker decodes every message: the answer to "QSGD under Horovod".
class GradientCodec {
 public:
  virtual ~GradientCodec() = default;
  // `tensors` are this worker's float32 gradients (flat views). Returns a uint8 message whose size
  // depends only on the shapes, so it is the same at every call and on every worker.
  virtual at::Tensor encode(const std::vector<at::Tensor>& tensors) = 0;
  // Writes the gradients a message stands for into `tensors` (float32 flat views, every element).
  virtual void decode(const at::Tensor& message, const std::vector<at::Tensor>& tensors) const = 0;
  // The message's bits by tensor, for tensors of `counts` elements (Reducer::lastCosts()).
  virtual std::vector<uint64_t> bitsByTensor(const std::vector<int64_t>& counts) const = 0;
  // What encode() carries between calls (a stochastic-rounding generator), for checkpoints; the
  // reducer forwards its saveState()/loadState() here.
  virtual void saveState(Reducer::State& /*state*/) const {}
  virtual void loadState(const Reducer::State& /*state*/) {}
};

// All-gathers the codec's messages, decodes each in rank order, and averages (identical on every
// rank). Memory = send - decode(own message): what this worker's contribution lost, so error
// feedback works and the mean over ranks of (send - memory) is the output. Bits: 8 * message bytes.
std::unique_ptr<Reducer> makeAllGatherReducer(Communicator& comm, std::unique_ptr<GradientCodec> codec);

// What makeAllGatherReducer sends per call with `codec` for tensors of `shapes`: the codec's
// bitsByTensor (lastCosts()), added up.
uint64_t codecPlannedBits(const GradientCodec& codec, const std::vector<std::vector<int64_t>>& shapes);

// Bit packing shared by the codecs: code i (0 <= code < 2^bits) occupies stream bits
// [i * bits, (i + 1) * bits), least significant bit first; stream bit j is bit (j % 8) of byte
// j / 8, and the last byte is zero-padded. So ceil(count * bits / 8) bytes.
at::Tensor packBits(const at::Tensor& codes, int64_t bits);
inline int64_t packedBytes(int64_t count, int64_t bits) { return (count * bits + 7) / 8; }

// The bits of encodeScaledCodes' message by tensor: its scale, and its elements' share of the codes.
std::vector<uint64_t> scaledCodesBits(const std::vector<int64_t>& counts, int64_t bits);
// Their sum for tensors of `shapes`: the whole message, its codes packed (and padded) as one.
uint64_t scaledCodesPlannedBits(const std::vector<std::vector<int64_t>>& shapes, int64_t bits);

// The message of the element-wise quantizers (qsgd, terngrad): one float32 scale per tensor (4T
// bytes, native order), then every element of every tensor in order as a `bits`-bit code.
//
// Encoding: one U[0, 1) draw per element from `generator` (what at::rand draws, into `uniform`,
// the caller's scratch, kept between calls so its pages are not faulted in again); per non-empty
// tensor g, `quantizer.scale(g)` is its scale (empty tensors send 0) and
// `quantizer.code(x, u, scale)` each element's code. One fused pass over raw memory: the codecs'
// element functions are inlined here, and no per-element tensor is materialised.
template <class Quantizer>
at::Tensor encodeScaledCodes(const std::vector<at::Tensor>& tensors, at::Generator& generator, int64_t bits,
                             const Quantizer& quantizer, at::Tensor& uniform);
// Decoding: `value(code)` is a code's float32 multiple of the scale; tensor i gets value times
// (scale_i / divisor), that factor computed as a float32 tensor op as before.
template <class Value>
void decodeScaledCodes(const at::Tensor& message, const std::vector<at::Tensor>& tensors, int64_t bits,
                       const Value& value, double divisor = 1.0);

// A float32 message's bytes (native order: all workers share one architecture) as a float tensor.
at::Tensor bytesAsFloats(const at::Tensor& bytes);

// A generator of this worker's own: stochastic rounding must be independent across workers for the
// average to be unbiased, and still reproducible from the shared seed.
at::Generator workerGenerator(uint64_t seed, int rank);

template <class Quantizer>
at::Tensor encodeScaledCodes(const std::vector<at::Tensor>& tensors, at::Generator& generator, int64_t bits,
                             const Quantizer& quantizer, at::Tensor& uniform) {
  if (tensors.empty()) return at::empty({0}, at::kByte);
  int64_t count = 0;
  for (const auto& t : tensors) count += t.numel();
  if (!uniform.defined() || uniform.numel() != count) uniform = at::empty({count}, at::kFloat);
  uniform.uniform_(0, 1, generator);  // at::rand's own draw
  const int64_t header = 4 * static_cast<int64_t>(tensors.size());
  auto message = at::empty({header + packedBytes(count, bits)}, at::kByte);
  auto* scales = reinterpret_cast<float*>(message.data_ptr<uint8_t>());
  BitWriter writer(message.data_ptr<uint8_t>() + header);
  const float* u = uniform.data_ptr<float>();
  // Codes a chunk at a time: the element loop then has no dependency between iterations and
  // vectorizes; the packing loop after it does not.
  constexpr int64_t kChunk = 1024;
  decltype(quantizer.code(0.0f, 0.0f, 0.0f)) codes[kChunk];
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t n = tensors[i].numel();
    scales[i] = 0;
    if (n == 0) continue;
    const CpuFloats g(tensors[i]);
    const float scale = quantizer.scale(tensors[i]);
    scales[i] = scale;
    const float* x = g.data();
    for (int64_t start = 0; start < n; start += kChunk) {
      const int64_t size = std::min(kChunk, n - start);
      for (int64_t j = 0; j < size; ++j) codes[j] = quantizer.code(x[start + j], u[start + j], scale);
      for (int64_t j = 0; j < size; ++j) writer.put(codes[j], static_cast<int>(bits));
    }
    u += n;
  }
  writer.finish();
  return message.to(tensors.front().device());
}

template <class Value>
void decodeScaledCodes(const at::Tensor& message, const std::vector<at::Tensor>& tensors, int64_t bits,
                       const Value& value, double divisor) {
  const int64_t header = 4 * static_cast<int64_t>(tensors.size());
  const auto bytes = message.to(at::kCPU).contiguous();
  const auto scales = bytesAsFloats(bytes.narrow(0, 0, header));
  const uint8_t* fields = bytes.data_ptr<uint8_t>() + header;
  const int64_t size = bytes.numel() - header;
  // Narrow codes go through a table of value(code), the same floats without the per-element work.
  std::vector<float> table(bits <= 16 ? size_t{1} << bits : 0);
  for (size_t code = 0; code < table.size(); ++code) table[code] = value(code);
  const auto decodeOne = [&](int64_t index) {
    const uint64_t code = fieldAt(fields, size, index, static_cast<int>(bits));
    return table.empty() ? value(code) : table[code];
  };
  int64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t n = tensors[i].numel();
    if (n == 0) continue;
    const float factor = (scales[static_cast<int64_t>(i)] / divisor).item<float>();
    const CpuFloats target(tensors[i]);
    float* out = target.data();
    for (int64_t j = 0; j < n; ++j) out[j] = decodeOne(offset + j) * factor;
    target.writeBack();
    offset += n;
  }
}

}  // namespace gcrun::reducers
