#include "reducers/quantized_reducer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/accumulate.h>

#include "reducers/bit_stream.h"
#include "reducers/tensor_buffer.h"
#include "reducers/tensor_costs.h"

namespace gcrun::reducers {
namespace {

class AllGatherReducer : public Reducer {
 public:
  AllGatherReducer(Communicator& comm, std::unique_ptr<GradientCodec> codec) : comm_(comm), codec_(std::move(codec)) {}

  uint64_t reduce(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& out,
                  const std::vector<at::Tensor>& memory) override {
    if (!allocated_) allocate(send);
    // Flat views of the gradients themselves (copies only of non-contiguous ones): read, never written.
    std::vector<at::Tensor> flat;
    for (const auto& t : send) flat.push_back(t.reshape({-1}));
    const auto message = codec_->encode(flat);
    // Gloo can hang on empty tensors; only a model without elements has an empty message.
    const auto messages =
        message.numel() > 0 ? comm_.allgather(message) : std::vector<at::Tensor>(comm_.size(), message);

    // Each message decoded, then added up in rank order in one pass that writes the output at the
    // last one and this worker's memory at its own: the float32 operations of sum = 0 + d_0 + ...,
    // out = sum * (1 / W) (a copy at W = 1), memory = send - d_rank, as whole-tensor ops did them.
    const auto decoded_slices = slices(decoded_);
    const int world = comm_.size();
    const auto scale = static_cast<float>(1.0 / world);
    for (int w = 0; w < world; ++w) {
      codec_->decode(messages[w], decoded_slices);
      const bool last = w + 1 == world, own = w == comm_.rank();
      float* sum = sum_.flat().data_ptr<float>();
      const float* decoded = decoded_.flat().data_ptr<float>();
      int64_t offset = 0;
      for (size_t i = 0; i < count_; ++i) {
        const int64_t n = out[i].numel();
        const CpuFloats average(last ? out[i] : at::empty({0}));
        const CpuFloats lost(own ? memory[i] : at::empty({0}));
        const CpuFloats sent_values(own ? flat[i] : at::empty({0}));
        float* to_out = average.data() - offset;
        float* to_memory = lost.data() - offset;
        const float* sent = sent_values.data() - offset;
        for (int64_t j = offset; j < offset + n; ++j) {
          const float total = (w == 0 ? 0.0f : sum[j]) + decoded[j];
          if (last) {
            to_out[j] = world == 1 ? total : total * scale;
          } else {
            sum[j] = total;
          }
          if (own) to_memory[j] = sent[j] - decoded[j];
        }
        if (last) average.writeBack();
        if (own) lost.writeBack();
        offset += n;
      }
    }
    return 8ull * static_cast<uint64_t>(message.numel());
  }

  std::vector<TensorCost> lastCosts() const override {
    std::vector<TensorCost> costs;
    for (uint64_t bits : codec_->bitsByTensor(counts_)) costs.push_back({bits, 0});
    return costs;
  }

  void saveState(State& state) const override { codec_->saveState(state); }
  void loadState(const State& state) override { codec_->loadState(state); }

 private:
  void allocate(const std::vector<at::Tensor>& like) {
    std::vector<at::Tensor> floats;
    for (const auto& t : like) floats.push_back(at::empty({t.numel()}, t.options().dtype(at::kFloat)));
    decoded_ = TensorBuffer(floats);
    sum_ = TensorBuffer(floats);
    count_ = like.size();
    counts_ = elementCounts(like);
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
  std::vector<int64_t> counts_;
  TensorBuffer decoded_, sum_;
};

}  // namespace

std::unique_ptr<Reducer> makeAllGatherReducer(Communicator& comm, std::unique_ptr<GradientCodec> codec) {
  return std::make_unique<AllGatherReducer>(comm, std::move(codec));
}

at::Tensor packBits(const at::Tensor& codes, int64_t bits) {
  const auto cpu = codes.to(at::kCPU, at::kLong).contiguous();
  auto packed = at::empty({packedBytes(codes.numel(), bits)}, at::kByte);
  BitWriter writer(packed.data_ptr<uint8_t>());
  const int64_t* code = cpu.data_ptr<int64_t>();
  for (int64_t i = 0; i < cpu.numel(); ++i) writer.put(static_cast<uint64_t>(code[i]), static_cast<int>(bits));
  writer.finish();
  return packed.to(codes.device());
}

std::vector<uint64_t> scaledCodesBits(const std::vector<int64_t>& counts, int64_t bits) {
  int64_t total = 0;
  for (int64_t n : counts) total += n;
  auto parts = splitInProportion(8 * static_cast<uint64_t>(packedBytes(total, bits)), counts);
  for (auto& part : parts) part += 32;
  return parts;
}

at::Tensor bytesAsFloats(const at::Tensor& bytes) {
  // view(dtype) needs the bytes to start on a float boundary of their storage: a copy has offset 0.
  return bytes.clone().view(at::kFloat);
}

at::Generator workerGenerator(uint64_t seed, int rank) {
  // Distinct from the shared generator (seeded with `seed` itself) and from every other rank's.
  return at::detail::createCPUGenerator(seed + 0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(rank) + 1));
}

namespace {

std::vector<int64_t> codecElementCounts(const std::vector<std::vector<int64_t>>& shapes) {
  std::vector<int64_t> counts;
  for (const auto& shape : shapes) counts.push_back(c10::multiply_integers(shape));
  return counts;
}

uint64_t codecBitsSum(const std::vector<uint64_t>& bits_by_tensor) {
  uint64_t bits = 0;
  for (uint64_t tensor_bits : bits_by_tensor) bits += tensor_bits;
  return bits;
}

}  // namespace

uint64_t codecPlannedBits(const GradientCodec& codec, const std::vector<std::vector<int64_t>>& shapes) {
  return codecBitsSum(codec.bitsByTensor(codecElementCounts(shapes)));
}

uint64_t scaledCodesPlannedBits(const std::vector<std::vector<int64_t>>& shapes, int64_t bits) {
  return codecBitsSum(scaledCodesBits(codecElementCounts(shapes), bits));
}

}  // namespace gcrun::reducers
