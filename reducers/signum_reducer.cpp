#include <ATen/ATen.h>

#include "reducers/builtin_reducers.h"
#include "reducers/sign_bits.h"
#include "reducers/tensor_buffer.h"
#include "reducers/tensor_costs.h"

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
    if (flat_.numel() == 0) {
      flat_ = TensorBuffer(send);
      vote_ = TensorBuffer(send);
      counts_ = elementCounts(send);
    }
    flat_.pack(send);
    const auto message = packSigns(flat_.flat());
    std::vector<const uint8_t*> bits;
    const auto messages = comm_.allgather(message);
    for (const auto& m : messages) bits.push_back(m.data_ptr<uint8_t>());
    // One pass: the sum of the +1 / -1 votes (exact in float32), its sign, and the memory.
    float* own = flat_.flat().data_ptr<float>();
    float* vote = vote_.flat().data_ptr<float>();
    for (int64_t j = 0; j < flat_.numel(); ++j) {
      float total = 0;
      for (const uint8_t* b : bits) total += sentSign(b, j);
      vote[j] = static_cast<float>((total > 0) - (total < 0));
      own[j] -= vote[j];
    }
    vote_.unpack(out);
    flat_.unpack(memory);
    message_bits_ = bitsOf(message);
    return message_bits_;
  }

  // The packed signs, shared by element (a bit each, the last byte's padding split too).
  std::vector<TensorCost> lastCosts() const override { return costsByElements(message_bits_, counts_); }

 private:
  Communicator& comm_;
  TensorBuffer flat_;  // this worker's gradient, then its memory
  TensorBuffer vote_;
  std::vector<int64_t> counts_;
  uint64_t message_bits_ = 0;
};

}  // namespace

ReducerSpec signumSpec() {
  const auto make = [](const ReducerContext& context) -> std::unique_ptr<Reducer> {
    return std::make_unique<SignumReducer>(context.comm);
  };
  ReducerSpec spec{make,
                   CollectiveKind::all_gather,
                   {},
                   false,
                   {Granularity::layer, Granularity::model, Granularity::bucket},
                   "SignSGDwithMajorityVoteReducer"};
  // A bit per element, packed and padded as one message.
  spec.planned_bits = [](const ReducerOptions& /*options*/, const TensorShapes& shapes) {
    return plannedSignBits(shapes);
  };
  spec.whole_step = true;
  return spec;
}

}  // namespace gcrun::reducers
