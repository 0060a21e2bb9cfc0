#include <ATen/ATen.h>

#include "reducers/builtin_reducers.h"
#include "reducers/granularity.h"
#include "reducers/tensor_buffer.h"
#include "reducers/tensor_costs.h"

namespace gcrun::reducers {
namespace {

// The reference's ExactReducer (every gradient all-reduced, then divided by the number of workers;
// nothing is lost, so the memory is zero), in buckets of reducer.bucket_mb as PyTorch DDP makes
// them (ddpBuckets, in granularity.h). A bucket is all-reduced, asynchronously, as soon as
// all its tensors are ready() and every earlier bucket has started, so that every rank starts the
// same collectives in the same order whatever order its gradients arrive in. Tensors that lie back
// to back in memory (the trainer's flat gradients) are all-reduced in place, without packing.
class ExactReducer : public Reducer {
 public:
  ExactReducer(Communicator& comm, int64_t bucket_bytes) : comm_(comm), bucket_bytes_(bucket_bytes) {}

  void ready(size_t index, const std::vector<at::Tensor>& send) override {
    if (buckets_.empty()) plan(send);
    ++buckets_[bucket_of_[index]].ready;
    startReadyBuckets(send, /*all=*/false);
  }

  uint64_t reduce(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& out,
                  const std::vector<at::Tensor>& memory) override {
    if (buckets_.empty()) plan(send);
    startReadyBuckets(send, /*all=*/true);
    uint64_t bits = 0;
    for (auto& bucket : buckets_) {
      if (bucket.pending) bucket.pending->wait();
      bucket.pending.reset();
      bucket.ready = 0;
      bucket.buffer.unpack(pick(out, bucket.members), 1.0 / comm_.size());
      bits += bitsOf(bucket.buffer.flat());
    }
    next_ = 0;
    // After the unpack: memory may be the send tensors that the buckets view. Averaged in place
    // (out is send), the caller's memory is zero already (see Reducer's contract).
    if (!sameTensors(out, send)) {
      for (const auto& m : memory) m.zero_();
    }
    return bits;
  }

  // Each tensor travels whole, in its bucket.
  std::vector<TensorCost> lastCosts() const override { return costs_; }

 private:
  struct Bucket {
    std::vector<size_t> members;
    TensorBuffer buffer;
    size_t ready = 0;
    std::unique_ptr<PendingCollective> pending;
  };

  void plan(const std::vector<at::Tensor>& send) {
    std::vector<int64_t> tensor_bytes;
    for (const auto& t : send) tensor_bytes.push_back(t.numel() * static_cast<int64_t>(t.element_size()));
    bucket_of_.assign(send.size(), 0);
    for (auto& members : ddpBuckets(tensor_bytes, bucket_bytes_)) {
      for (size_t k : members) bucket_of_[k] = buckets_.size();
      buckets_.emplace_back();
      buckets_.back().buffer = TensorBuffer::over(pick(send, members));
      buckets_.back().members = std::move(members);
    }
    for (const auto& t : send) costs_.push_back({bitsOf(t), 0});
  }

  void startReadyBuckets(const std::vector<at::Tensor>& send, bool all) {
    for (; next_ < buckets_.size(); ++next_) {
      Bucket& bucket = buckets_[next_];
      if (!all && bucket.ready < bucket.members.size()) return;
      bucket.buffer.pack(pick(send, bucket.members));
      // Gloo can hang on empty tensors.
      if (bucket.buffer.numel() > 0) bucket.pending = comm_.allreduceSumAsync(bucket.buffer.flat());
    }
  }

  Communicator& comm_;
  int64_t bucket_bytes_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;
  size_t next_ = 0;  // the first bucket not started this step
  std::vector<TensorCost> costs_;
};

}  // namespace

std::unique_ptr<Reducer> makeExactReducer(const ReducerContext& context) {
  return std::make_unique<ExactReducer>(context.comm, bucketBytes(context.options));
}

ReducerSpec exactSpec() {
  ReducerSpec spec{makeExactReducer,
                   CollectiveKind::all_reduce,
                   {},
                   true,
                   {Granularity::layer, Granularity::model, Granularity::bucket},
                   "ExactReducer",
                   true,
                   Baseline::full_precision};
  spec.planned_bits = exactPlannedBits;
  return spec;
}

// Each tensor travels whole in float32, in its bucket (lastCosts()).
uint64_t exactPlannedBits(const ReducerOptions& /*options*/, const TensorShapes& shapes) {
  uint64_t bits = 0;
  for (const auto& shape : shapes) bits += 8 * sizeof(float) * elementCount(shape);
  return bits;
}

}  // namespace gcrun::reducers
