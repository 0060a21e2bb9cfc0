#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <ATen/ATen.h>

#include "reducers/reducer.h"

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
  // What encode() carries between calls (a stochastic-rounding generator), for checkpoints; the
  // reducer forwards its saveState()/loadState() here.
  virtual void saveState(Reducer::State& /*state*/) const {}
  virtual void loadState(const Reducer::State& /*state*/) {}
};

// All-gathers the codec's messages, decodes each in rank order, and averages (identical on every
// rank). Memory = send - decode(own message): what this worker's contribution lost, so error
// feedback works and the mean over ranks of (send - memory) is the output. Bits: 8 * message bytes.
std::unique_ptr<Reducer> makeAllGatherReducer(Communicator& comm, std::unique_ptr<GradientCodec> codec);

// Bit packing shared by the codecs: code i (0 <= code < 2^bits) occupies stream bits
// [i * bits, (i + 1) * bits), least significant bit first; stream bit j is bit (j % 8) of byte
// j / 8, and the last byte is zero-padded. So ceil(count * bits / 8) bytes.
at::Tensor packBits(const at::Tensor& codes, int64_t bits);
// The inverse: `count` int64 codes of `bits` bits from a uint8 tensor made by packBits.
at::Tensor unpackBits(const at::Tensor& bytes, int64_t count, int64_t bits);
inline int64_t packedBytes(int64_t count, int64_t bits) { return (count * bits + 7) / 8; }

// The message of the element-wise quantizers (qsgd, terngrad): one float32 scale per tensor (4T
// bytes, native order), then every element of every tensor in order as a `bits`-bit code.
//
// Encoding: `quantize(g, uniform, scale)` gets one non-empty tensor, a U[0, 1) draw per element
// (from `generator`, one draw for all tensors), and the tensor's scale entry (zero, to fill in),
// and returns the elements' int64 codes.
using ElementQuantizer = std::function<at::Tensor(const at::Tensor& g, const at::Tensor& uniform, at::Tensor scale)>;
at::Tensor encodeScaledCodes(const std::vector<at::Tensor>& tensors, at::Generator& generator, int64_t bits,
                             const ElementQuantizer& quantize);
// Decoding: `values(codes)` turns all codes into float32 multiples of the scale; tensor i gets its
// values times scale_i / divisor.
void decodeScaledCodes(const at::Tensor& message, const std::vector<at::Tensor>& tensors, int64_t bits,
                       const std::function<at::Tensor(const at::Tensor& codes)>& values, double divisor = 1.0);

// A float32 tensor's bytes in native order (all workers share one architecture), and back.
at::Tensor floatsAsBytes(const at::Tensor& floats);
at::Tensor bytesAsFloats(const at::Tensor& bytes);

// A generator of this worker's own: stochastic rounding must be independent across workers for the
// average to be unbiased, and still reproducible from the shared seed.
at::Generator workerGenerator(uint64_t seed, int rank);

}  // namespace gcrun::reducers
