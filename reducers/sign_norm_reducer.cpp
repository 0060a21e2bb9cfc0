#include <ATen/ATen.h>

#include "reducers/builtin_reducers.h"
#include "reducers/sign_bits.h"
#include "reducers/tensor_buffer.h"

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
class SignNormReducer : public Reducer {
 public:
  explicit SignNormReducer(Communicator& comm) : comm_(comm) {}

  uint64_t reduce(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& out,
                  const std::vector<at::Tensor>& memory) override {
    if (flat_.numel() == 0) flat_ = TensorBuffer(send);
    flat_.pack(send);
    const auto signs = packSigns(flat_.flat());
    auto scales = at::empty({static_cast<int64_t>(send.size())}, flat_.flat().options());
    for (size_t i = 0; i < send.size(); ++i) {
      scales[static_cast<int64_t>(i)].copy_(send[i].abs().sum() / std::max<int64_t>(send[i].numel(), 1));
    }
    const auto all_signs = comm_.allgather(signs);
    const auto all_scales = comm_.allgather(scales);

    for (const auto& o : out) o.zero_();
    for (size_t w = 0; w < all_signs.size(); ++w) {
      flat_.flat().copy_(unpackSigns(all_signs[w], flat_.numel(), flat_.flat().scalar_type()));
      for (size_t i = 0; i < out.size(); ++i) {
        auto decoded = flat_.slice(i).view(out[i].sizes()) * all_scales[w][static_cast<int64_t>(i)];
        out[i].add_(decoded);
        if (static_cast<int>(w) != comm_.rank()) continue;
        auto error = memory[i];
        at::sub_out(error, send[i], decoded);
      }
    }
    for (const auto& o : out) o.div_(comm_.size());
    return bitsOf(signs) + bitsOf(scales);
  }

 private:
  Communicator& comm_;
  TensorBuffer flat_;
};

}  // namespace

ReducerSpec signNormSpec() {
  const auto make = [](const ReducerContext& context) -> std::unique_ptr<Reducer> {
    return std::make_unique<SignNormReducer>(context.comm);
  };
  return {make, "all-gather", {}, true, {Granularity::layer, Granularity::model, Granularity::bucket}, "SignAndNormReducer"};
}

}  // namespace gcrun::reducers
