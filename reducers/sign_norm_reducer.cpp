#include <ATen/ATen.h>

#include "reducers/builtin_reducers.h"
#include "reducers/sign_bits.h"
#include "reducers/tensor_buffer.h"
#include "reducers/tensor_costs.h"

namespace gcrun::reducers {
namespace {

// The reference's SignAndNormReducer (powersgd.md 1.6): the paper's "Sign+Norm" with error
// feedback.
//  - Per tensor, scale = |g|_1 / numel; the worker sends the signs of its whole flattened gradient,
//    bit-packed (sign_bits.h), and its scales as float32, in two all-gathers:
//    32 * ceil(N / 32) + 32 * (number of tensors) bits.
//  - out = the mean over workers of scale * sign; memory = g - scale * sign(g), this worker's own
//    part. The reference subtracts torch.sign(g), which is 0 where g is 0 although +1 was sent
//    there; gcrun subtracts what it sent, so that the mean of send - memory is the output.
constexpr uint64_t kSignNormScaleBits = 8 * sizeof(float);

class SignNormReducer : public Reducer {
 public:
  explicit SignNormReducer(Communicator& comm) : comm_(comm) {}

  uint64_t reduce(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& out,
                  const std::vector<at::Tensor>& memory) override {
    if (flat_.numel() == 0) {
      flat_ = TensorBuffer(send);
      sum_ = TensorBuffer(send);
      counts_ = elementCounts(send);
    }
    flat_.pack(send);
    const auto signs = packSigns(flat_.flat());
    auto scales = at::empty({static_cast<int64_t>(send.size())}, flat_.flat().options());
    for (size_t i = 0; i < send.size(); ++i) {
      scales[static_cast<int64_t>(i)].copy_(send[i].abs().sum() / std::max<int64_t>(send[i].numel(), 1));
    }
    const auto all_signs = comm_.allgather(signs);
    const auto all_scales = comm_.allgather(scales);

    // One pass: every worker's scale * sign added up in rank order, then divided by W (the float32
    // operations of the former whole-tensor version, in the same order); this worker's own
    // decoded value taken off its gradient for the memory.
    const int world = comm_.size();
    std::vector<const uint8_t*> bits;
    std::vector<const float*> scale;
    for (int w = 0; w < world; ++w) {
      bits.push_back(all_signs[w].data_ptr<uint8_t>());
      scale.push_back(all_scales[w].data_ptr<float>());
    }
    float* own = flat_.flat().data_ptr<float>();
    float* sum = sum_.flat().data_ptr<float>();
    int64_t offset = 0;
    const int rank = comm_.rank();
    const auto divisor = static_cast<float>(world);
    for (size_t i = 0; i < send.size(); ++i) {
      const int64_t end = offset + send[i].numel();
      for (int64_t j = offset; j < end; ++j) {
        float total = 0;
        for (int w = 0; w < world; ++w) total += sentSign(bits[w], j) * scale[w][i];
        own[j] -= sentSign(bits[rank], j) * scale[rank][i];
        sum[j] = total / divisor;
      }
      offset = end;
    }
    sum_.unpack(out);
    flat_.unpack(memory);
    sign_bits_ = bitsOf(signs);
    return sign_bits_ + bitsOf(scales);
  }

  // A tensor sends its scale and its share of the packed signs (a bit an element).
  std::vector<TensorCost> lastCosts() const override {
    auto costs = costsByElements(sign_bits_, counts_);
    for (auto& cost : costs) cost.bits += kSignNormScaleBits;
    return costs;
  }

 private:
  Communicator& comm_;
  TensorBuffer flat_;  // this worker's gradient, then its memory
  TensorBuffer sum_;
  std::vector<int64_t> counts_;
  uint64_t sign_bits_ = 0;
};

}  // namespace

ReducerSpec signNormSpec() {
  const auto make = [](const ReducerContext& context) -> std::unique_ptr<Reducer> {
    return std::make_unique<SignNormReducer>(context.comm);
  };
  ReducerSpec spec{make,
                   CollectiveKind::all_gather,
                   {},
                   true,
                   {Granularity::layer, Granularity::model, Granularity::bucket},
                   "SignAndNormReducer"};
  // The packed signs of all the tensors, padded as one message, and a float32 scale per tensor.
  spec.planned_bits = [](const ReducerOptions& /*options*/, const TensorShapes& shapes) {
    return plannedSignBits(shapes) + kSignNormScaleBits * shapes.size();
  };
  spec.whole_step = true;
  return spec;
}

}  // namespace gcrun::reducers
