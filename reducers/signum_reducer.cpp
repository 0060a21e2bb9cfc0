#include <ATen/ATen.h>

#include "reducers/builtin_reducers.h"
#include "reducers/sign_bits.h"
#include "reducers/tensor_buffer.h"

namespace gcrun::reducers {
namespace {

// The reference's SignSGDwithMajorityVoteReducer (powersgd.md 1.6): the paper's Signum, run with
// momentum before the reduce and memory off (the reference fills memory with -1e7 to make that
// clear).
//  - Every worker sends the signs of its whole flattened gradient, bit-packed (sign_bits.h), in
//    one all-gather: 32 * ceil(N / 32) bits for N elements in all.
//  - Every worker sums the +1 / -1 signs of all workers and applies the sign of the sum: the
//    majority vote. A tie (an even number of workers split evenly) gives 0, as torch.sign of the
//    sum does in the reference.
// memory = send - out: the vote is what every worker's message stood for, so the mean over workers
// of send - memory is the output, as for the other reducers.
class SignumReducer : public Reducer {
 public:
  explicit SignumReducer(Communicator& comm) : comm_(comm) {}

  uint64_t reduce(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& out,
                  const std::vector<at::Tensor>& memory) override {
    if (flat_.numel() == 0) flat_ = TensorBuffer(send);
    flat_.pack(send);
    const auto message = packSigns(flat_.flat());
    auto votes = at::zeros_like(flat_.flat());
    for (const auto& m : comm_.allgather(message)) {
      votes.add_(unpackSigns(m, flat_.numel(), votes.scalar_type()));
    }
    flat_.flat().copy_(votes.sign_());
    flat_.unpack(out);
    for (size_t i = 0; i < send.size(); ++i) {
      auto error = memory[i];
      at::sub_out(error, send[i], out[i]);
    }
    return bitsOf(message);
  }

 private:
  Communicator& comm_;
  TensorBuffer flat_;
};

}  // namespace

ReducerSpec signumSpec() {
  const auto make = [](const ReducerContext& context) -> std::unique_ptr<Reducer> {
    return std::make_unique<SignumReducer>(context.comm);
  };
  return {make, "all-gather", {}, false, {Granularity::layer, Granularity::model, Granularity::bucket}, "SignSGDwithMajorityVoteReducer"};
}

}  // namespace gcrun::reducers
