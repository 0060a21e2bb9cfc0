#include <ATen/ATen.h>

#include "reducers/builtin_reducers.h"
#include "reducers/shared_settings.h"
#include "reducers/tensor_buffer.h"
#include "reducers/top_magnitudes.h"

namespace gcrun::reducers {
namespace {

struct GlobalTopKOptions {
  double compression = 0.01;
};

const hyperparams::SettingsSchema<GlobalTopKOptions>& globalTopKSettings() {
  static const auto schema =
      withCompression(hyperparams::SettingsSchema<GlobalTopKOptions>(), &GlobalTopKOptions::compression);
  return schema;
}

// k of the whole gradient's n elements at compression c: max(1, floor(0.5 c n)), at most n.
int64_t globalTopKSize(double compression, int64_t n) {
  return n == 0 ? 0 : std::min(n, std::max<int64_t>(1, static_cast<int64_t>(0.5 * compression * n)));
}

// A sent element's float32 value and its int64 position in the flat gradient.
constexpr uint64_t kGlobalTopKPairBits = 8 * (sizeof(float) + sizeof(int64_t));

// The reference's GlobalTopKReducer (powersgd.md 1.6): the k = max(1, floor(0.5 c N)) largest
// magnitudes of the whole flattened gradient (N elements over all tensors), so large-gradient
// layers take more of the budget than in per-tensor top-k. Two all-gathers, as the reference: the
// float32 values and their int64 positions in the flat gradient. Every worker adds every worker's
// values / W at their positions into a zero gradient, in rank order. Memory = g with the sent
// entries zeroed. Bits = 32 k + 64 k.
class GlobalTopKReducer : public Reducer {
 public:
  GlobalTopKReducer(Communicator& comm, double compression) : comm_(comm), compression_(compression) {}

  uint64_t reduce(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& out,
                  const std::vector<at::Tensor>& memory) override {
    if (!allocated_) {
      flat_ = TensorBuffer(send);
      size_ = globalTopKSize(compression_, flat_.numel());
      int64_t end = 0;
      for (const auto& t : send) ends_.push_back(end += t.numel());
      allocated_ = true;
    }
    flat_.pack(send);
    auto& g = flat_.flat();
    auto positions = topMagnitudePositions(g, size_);
    auto values = g.index_select(0, positions);
    g.index_fill_(0, positions, 0);
    flat_.unpack(memory);

    // Gloo can hang on empty tensors; only a model without elements sends nothing.
    auto all_values = size_ > 0 ? comm_.allgather(values) : std::vector<at::Tensor>{};
    auto all_positions = size_ > 0 ? comm_.allgather(positions) : std::vector<at::Tensor>{};
    g.zero_();
    for (size_t w = 0; w < all_values.size(); ++w) g.index_add_(0, all_positions[w], all_values[w] / comm_.size());
    flat_.unpack(out);
    positions_ = positions;
    return bitsOf(values) + bitsOf(positions);
  }

  // A tensor sends a value and a position for each of the k positions that fell into it.
  std::vector<TensorCost> lastCosts() const override {
    const auto tensors = static_cast<int64_t>(ends_.size());
    const auto owners =
        at::bucketize(positions_.cpu(), at::tensor(ends_, at::kLong), /*out_int32=*/false, /*right=*/true);
    const auto counts = at::bincount(owners, {}, tensors);
    std::vector<TensorCost> costs;
    for (int64_t i = 0; i < tensors; ++i)
      costs.push_back({kGlobalTopKPairBits * static_cast<uint64_t>(counts[i].item<int64_t>()), 0});
    return costs;
  }

 private:
  Communicator& comm_;
  const double compression_;
  bool allocated_ = false;
  int64_t size_ = 0;
  TensorBuffer flat_;
  std::vector<int64_t> ends_;  // where each tensor ends in the flat gradient
  at::Tensor positions_;       // the last call's, for lastCosts()
};

// k values and positions of all the tensors together: a whole step's, not a sum over its buckets.
uint64_t globalTopKPlannedBits(const ReducerOptions& options, const TensorShapes& shapes) {
  int64_t n = 0;
  for (const auto& shape : shapes) n += static_cast<int64_t>(elementCount(shape));
  return kGlobalTopKPairBits *
         static_cast<uint64_t>(globalTopKSize(globalTopKSettings().read(options.settings).compression, n));
}

}  // namespace

ReducerSpec globalTopKSpec() {
  const auto make = [](const ReducerContext& context) -> std::unique_ptr<Reducer> {
    return std::make_unique<GlobalTopKReducer>(context.comm,
                                               globalTopKSettings().read(context.options.settings).compression);
  };
  ReducerSpec spec{make,
                   CollectiveKind::all_gather,
                   globalTopKSettings().specs(),
                   true,
                   {Granularity::layer, Granularity::model, Granularity::bucket},
                   "GlobalTopKReducer"};
  spec.planned_bits = globalTopKPlannedBits;
  spec.whole_step = true;
  return spec;
}

}  // namespace gcrun::reducers
