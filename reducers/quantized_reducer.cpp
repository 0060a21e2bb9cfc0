#include "reducers/quantized_reducer.h"

#include <ATen/CPUGeneratorImpl.h>

#include "reducers/tensor_buffer.h"

namespace gcrun::reducers {
namespace {

class AllGatherReducer : public Reducer {
 public:
  AllGatherReducer(Communicator& comm, std::unique_ptr<GradientCodec> codec)
      : comm_(comm), codec_(std::move(codec)) {}

  uint64_t reduce(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& out,
                  const std::vector<at::Tensor>& memory) override {
    if (!allocated_) allocate(send);
    own_.pack(send);
    const auto message = codec_->encode(slices(own_));
    // Gloo can hang on empty tensors; only a model without elements has an empty message.
    const auto messages =
        message.numel() > 0 ? comm_.allgather(message) : std::vector<at::Tensor>(comm_.size(), message);

    sum_.flat().zero_();
    const auto decoded_slices = slices(decoded_);
    for (int w = 0; w < comm_.size(); ++w) {
      codec_->decode(messages[w], decoded_slices);
      sum_.flat().add_(decoded_.flat());
      // Turns own_ into this worker's memory: what its message failed to carry.
      if (w == comm_.rank()) own_.flat().sub_(decoded_.flat());
    }
    sum_.unpack(out, 1.0 / comm_.size());
    own_.unpack(memory);
    return 8ull * static_cast<uint64_t>(message.numel());
  }

  void saveState(State& state) const override { codec_->saveState(state); }
  void loadState(const State& state) override { codec_->loadState(state); }

 private:
  void allocate(const std::vector<at::Tensor>& like) {
    std::vector<at::Tensor> floats;
    for (const auto& t : like) floats.push_back(at::empty({t.numel()}, t.options().dtype(at::kFloat)));
    own_ = TensorBuffer(floats);
    decoded_ = TensorBuffer(floats);
    sum_ = TensorBuffer(floats);
    count_ = like.size();
    allocated_ = true;
  }

  std::vector<at::Tensor> slices(const TensorBuffer& buffer) const {
    std::vector<at::Tensor> out;
    for (size_t i = 0; i < count_; ++i) out.push_back(buffer.slice(i));
    return out;
  }

  Communicator& comm_;
  std::unique_ptr<GradientCodec> codec_;
  bool allocated_ = false;
  size_t count_ = 0;
  TensorBuffer own_, decoded_, sum_;
};

}  // namespace

std::unique_ptr<Reducer> makeAllGatherReducer(Communicator& comm, std::unique_ptr<GradientCodec> codec) {
  return std::make_unique<AllGatherReducer>(comm, std::move(codec));
}

// Tensor ops rather than a byte loop, so that packing runs on the gradients' device.
at::Tensor packBits(const at::Tensor& codes, int64_t bits) {
  const int64_t count = codes.numel();
  const int64_t bytes = packedBytes(count, bits);
  auto stream = at::zeros({bytes * 8}, codes.options().dtype(at::kByte));
  auto fields = stream.narrow(0, 0, count * bits).view({count, bits});
  for (int64_t j = 0; j < bits; ++j) fields.select(1, j).copy_(codes.bitwise_right_shift(j).bitwise_and(1));
  auto octets = stream.view({bytes, 8});
  auto packed = at::zeros({bytes}, codes.options().dtype(at::kByte));
  for (int64_t k = 0; k < 8; ++k) packed.bitwise_or_(octets.select(1, k).bitwise_left_shift(k));
  return packed;
}

at::Tensor unpackBits(const at::Tensor& bytes, int64_t count, int64_t bits) {
  auto stream = at::empty({bytes.numel(), 8}, bytes.options());
  for (int64_t k = 0; k < 8; ++k) stream.select(1, k).copy_(bytes.bitwise_right_shift(k).bitwise_and(1));
  auto fields = stream.view({-1}).narrow(0, 0, count * bits).view({count, bits}).to(at::kLong);
  auto codes = at::zeros({count}, fields.options());
  for (int64_t j = 0; j < bits; ++j) codes.bitwise_or_(fields.select(1, j).bitwise_left_shift(j));
  return codes;
}

at::Tensor encodeScaledCodes(const std::vector<at::Tensor>& tensors, at::Generator& generator, int64_t bits,
                             const ElementQuantizer& quantize) {
  if (tensors.empty()) return at::empty({0}, at::kByte);
  int64_t count = 0;
  for (const auto& t : tensors) count += t.numel();
  const auto options = tensors.front().options();
  const auto uniform = at::rand({count}, generator, at::TensorOptions().dtype(at::kFloat)).to(options.device());
  auto scales = at::zeros({static_cast<int64_t>(tensors.size())}, options);
  auto codes = at::empty({count}, options.dtype(at::kLong));
  int64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t n = tensors[i].numel();
    if (n == 0) continue;
    codes.narrow(0, offset, n).copy_(quantize(tensors[i], uniform.narrow(0, offset, n), scales[i]));
    offset += n;
  }
  return at::cat({floatsAsBytes(scales), packBits(codes, bits)});
}

void decodeScaledCodes(const at::Tensor& message, const std::vector<at::Tensor>& tensors, int64_t bits,
                       const std::function<at::Tensor(const at::Tensor& codes)>& values, double divisor) {
  const int64_t header = 4 * static_cast<int64_t>(tensors.size());
  int64_t count = 0;
  for (const auto& t : tensors) count += t.numel();
  const auto scales = bytesAsFloats(message.narrow(0, 0, header));
  const auto decoded = values(unpackBits(message.narrow(0, header, message.numel() - header), count, bits));
  int64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t n = tensors[i].numel();
    auto target = tensors[i];
    at::mul_out(target, decoded.narrow(0, offset, n), scales[i] / divisor);
    offset += n;
  }
}

at::Tensor floatsAsBytes(const at::Tensor& floats) {
  return floats.to(at::kFloat).contiguous().view(at::kByte);
}

at::Tensor bytesAsFloats(const at::Tensor& bytes) {
  // view(dtype) needs the bytes to start on a float boundary of their storage: a copy has offset 0.
  return bytes.clone().view(at::kFloat);
}

at::Generator workerGenerator(uint64_t seed, int rank) {
  // Distinct from the shared generator (seeded with `seed` itself) and from every other rank's.
  return at::detail::createCPUGenerator(seed + 0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(rank) + 1));
}

}  // namespace gcrun::reducers
