#include <ATen/ATen.h>

#include "reducers/builtin_reducers.h"
#include "reducers/shared_settings.h"
#include "reducers/tensor_buffer.h"
#include "reducers/top_magnitudes.h"

namespace gcrun::reducers {
namespace {

struct TopKOptions {
  double compression = 0.01;
};

const hyperparams::SettingsSchema<TopKOptions>& settings() {
  static const auto schema = withCompression(hyperparams::SettingsSchema<TopKOptions>(), &TopKOptions::compression);
  return schema;
}

// Elements a tensor of `numel` sends at compression c: max(1, floor(0.5 * c * numel)); values and
// positions both count, so c is the fraction of the dense size on the wire.
int64_t topkSize(double compression, int64_t numel) {
  if (numel == 0) return 0;
  return std::min(numel, std::max<int64_t>(1, static_cast<int64_t>(0.5 * compression * numel)));
}

// The reference's TopKReducer (powersgd.md 1.6): per tensor, the k = max(1, floor(0.5 c numel))
// largest magnitudes. Two all-gathers, as the reference: the float32 values of all tensors back to
// back, and their int32 positions within their tensor. Every worker adds every worker's values / W
// at their positions into a zero gradient (rank order, so the sum is identical on every rank).
// Memory = g with the sent entries zeroed. Bits = 32 K + 32 K, K = sum of the k's.
// Differences from the reference: the released 2019 code read the worker rank as the compression
// (fixed in 2020); here c is reducer.compression, and hyperparameters.md's "Medium" (c = 1/136) and
// "High" (c = 1/32) labels are swapped relative to the paper's data columns: the paper's intent is
// Medium = c 1/32 (32 MB/epoch), High = c 1/136 (8 MB/epoch), which is what c means here.
class TopKReducer : public Reducer {
 public:
  TopKReducer(Communicator& comm, double compression) : comm_(comm), compression_(compression) {}

  uint64_t reduce(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& out,
                  const std::vector<at::Tensor>& memory) override {
    if (!allocated_) allocate(send);
    flat_.pack(send);
    int64_t slot = 0;
    for (size_t i = 0; i < send.size(); ++i) {
      const int64_t k = sizes_[i];
      if (k == 0) continue;
      auto g = flat_.slice(i);
      auto positions = topMagnitudePositions(g, k);
      values_.narrow(0, slot, k).copy_(g.index_select(0, positions));
      positions_.narrow(0, slot, k).copy_(positions);
      slot += k;
    }
    flat_.flat().index_fill_(0, flatPositions(positions_), 0);
    flat_.unpack(memory);

    // Gloo can hang on empty tensors; only a model without elements sends nothing.
    const int64_t total = values_.numel();
    auto all_values = total > 0 ? comm_.allgather(values_) : std::vector<at::Tensor>{};
    auto all_positions = total > 0 ? comm_.allgather(positions_) : std::vector<at::Tensor>{};
    flat_.flat().zero_();
    for (size_t w = 0; w < all_values.size(); ++w) {
      flat_.flat().index_add_(0, flatPositions(all_positions[w]), all_values[w] / comm_.size());
    }
    flat_.unpack(out);
    return bitsOf(values_) + bitsOf(positions_);
  }

 private:
  void allocate(const std::vector<at::Tensor>& like) {
    flat_ = TensorBuffer(like);
    std::vector<at::Tensor> slot_offsets;
    int64_t offset = 0;
    for (const auto& t : like) {
      sizes_.push_back(topkSize(compression_, t.numel()));
      slot_offsets.push_back(at::full({sizes_.back()}, offset, t.options().dtype(at::kLong)));
      offset += t.numel();
    }
    const auto options = flat_.flat().options();
    slot_offsets_ = like.empty() ? at::empty({0}, options.dtype(at::kLong)) : at::cat(slot_offsets);
    values_ = at::empty({slot_offsets_.numel()}, options);
    positions_ = at::empty({slot_offsets_.numel()}, options.dtype(at::kInt));
    allocated_ = true;
  }

  // A message's positions within their tensors, as positions in the flat gradient.
  at::Tensor flatPositions(const at::Tensor& positions) const { return positions.to(at::kLong) + slot_offsets_; }

  Communicator& comm_;
  const double compression_;
  bool allocated_ = false;
  std::vector<int64_t> sizes_;
  at::Tensor slot_offsets_;  // for each sent slot, where its tensor starts in the flat gradient
  at::Tensor values_, positions_;
  TensorBuffer flat_;
};

}  // namespace

ReducerSpec topKSpec() {
  const auto make = [](const ReducerContext& context) -> std::unique_ptr<Reducer> {
    return std::make_unique<TopKReducer>(context.comm, settings().read(context.options.settings).compression);
  };
  return {make, "all-gather", settings().specs(), true, {Granularity::layer, Granularity::model, Granularity::bucket}, "TopKReducer"};
}

}  // namespace gcrun::reducers
