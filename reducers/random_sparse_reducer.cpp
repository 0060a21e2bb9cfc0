#include "reducers/random_sparse_reducer.h"

#include <ATen/CPUGeneratorImpl.h>

#include "reducers/generator_state.h"
#include "reducers/shared_settings.h"
#include "reducers/tensor_buffer.h"

namespace gcrun::reducers {
namespace {

struct RandomSparseOptions {
  double compression = 0.01;
  bool rescale = false;
};

const hyperparams::SettingsSchema<RandomSparseOptions>& randomSparseSettings() {
  using O = RandomSparseOptions;
  static const auto schema =
      withRescale(withCompression(hyperparams::SettingsSchema<O>(), &O::compression), &O::rescale);
  return schema;
}

// k of a tensor of `numel` at compression c: max(1, floor(c numel)), at most numel.
int64_t randomSparseCount(double compression, int64_t numel) {
  return numel == 0 ? 0 : std::min(numel, std::max<int64_t>(1, static_cast<int64_t>(compression * numel)));
}

class RandomSparseReducer : public Reducer {
 public:
  RandomSparseReducer(const ReducerContext& context, const RandomSparseOptions& options, IndexSampler sampler)
      : comm_(context.comm),
        compression_(options.compression),
        rescale_(options.rescale),
        sampler_(std::move(sampler)),
        generator_(at::detail::createCPUGenerator(context.seed)) {}

  uint64_t reduce(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& out,
                  const std::vector<at::Tensor>& memory) override {
    if (!allocated_) allocate(send);
    // Straight from and into the caller's tensors, one tensor at a time: no packed copies. The
    // index draws come first, in tensor order, as before.
    const auto device = values_.device();
    std::vector<at::Tensor> indices(send.size());
    for (size_t i = 0; i < send.size(); ++i) {
      if (sizes_[i] > 0) indices[i] = sampler_(send[i].numel(), sizes_[i], generator_).to(device);
    }
    int64_t slot = 0;
    for (size_t i = 0; i < send.size(); ++i) {
      if (sizes_[i] == 0) continue;
      values_.narrow(0, slot, sizes_[i]).copy_(send[i].reshape({-1}).index_select(0, indices[i]));
      slot += sizes_[i];
    }
    slot = 0;
    for (size_t i = 0; i < send.size(); ++i) {
      memory[i].copy_(send[i]);
      if (sizes_[i] == 0) continue;
      const auto kept = values_.narrow(0, slot, sizes_[i]) * (1 - scales_.narrow(0, slot, sizes_[i]));
      withFlat(memory[i], [&](const at::Tensor& m) { m.index_copy_(0, indices[i], kept); });
      slot += sizes_[i];
    }

    // Gloo can hang on empty tensors; only a model without elements sends nothing.
    if (values_.numel() > 0) comm_.allreduceSum(values_);
    slot = 0;
    for (size_t i = 0; i < send.size(); ++i) {
      const int64_t k = sizes_[i];
      withFlat(out[i], [&](const at::Tensor& o) {
        o.zero_();
        if (k > 0)
          o.index_copy_(0, indices[i], values_.narrow(0, slot, k) * (scales_.narrow(0, slot, k) / comm_.size()));
      });
      slot += k;
    }
    return bitsOf(values_);
  }

  // A tensor sends the values at its drawn indices (the indices follow from the shared seed).
  std::vector<TensorCost> lastCosts() const override {
    const auto value_bits = static_cast<uint64_t>(8 * values_.element_size());
    std::vector<TensorCost> costs;
    for (int64_t k : sizes_) costs.push_back({value_bits * static_cast<uint64_t>(k), 0});
    return costs;
  }

  // Only the shared generator: the index draws are all that carries over between calls.
  void saveState(State& state) const override { saveGenerator(state, "generator", generator_); }
  void loadState(const State& state) override { loadGenerator(state, "random-sparse", "generator", generator_); }

 private:
  void allocate(const std::vector<at::Tensor>& like) {
    const auto options = like.empty() ? at::TensorOptions() : like.front().options();
    std::vector<at::Tensor> scales;
    for (const auto& t : like) {
      const int64_t numel = t.numel();
      const int64_t k = randomSparseCount(compression_, numel);
      sizes_.push_back(k);
      const double scale = rescale_ && k > 0 ? static_cast<double>(numel) / k : 1.0;
      scales.push_back(at::full({k}, scale, options));
    }
    scales_ = scales.empty() ? at::empty({0}, options) : at::cat(scales);
    values_ = at::empty_like(scales_);
    allocated_ = true;
  }

  Communicator& comm_;
  const double compression_;
  const bool rescale_;
  IndexSampler sampler_;
  at::Generator generator_;
  bool allocated_ = false;
  std::vector<int64_t> sizes_;
  at::Tensor scales_;  // per sent value: numel / k of its tensor with reducer.rescale, else 1
  at::Tensor values_;
};

// Per tensor, its k sampled values in float32 (lastCosts()); the indices are not sent.
uint64_t randomSparsePlannedBits(const ReducerOptions& options, const TensorShapes& shapes) {
  const double compression = randomSparseSettings().read(options.settings).compression;
  uint64_t bits = 0;
  for (const auto& shape : shapes) {
    bits += 8 * sizeof(float) *
            static_cast<uint64_t>(randomSparseCount(compression, static_cast<int64_t>(elementCount(shape))));
  }
  return bits;
}

}  // namespace

ReducerSpec randomSparseSpec(IndexSampler sampler, std::string reference_name) {
  const auto make = [sampler](const ReducerContext& context) -> std::unique_ptr<Reducer> {
    return std::make_unique<RandomSparseReducer>(context, randomSparseSettings().read(context.options.settings),
                                                 sampler);
  };
  ReducerSpec spec{make,
                   CollectiveKind::all_reduce,
                   randomSparseSettings().specs(),
                   true,
                   {Granularity::layer, Granularity::model, Granularity::bucket},
                   std::move(reference_name)};
  spec.planned_bits = randomSparsePlannedBits;
  return spec;
}

}  // namespace gcrun::reducers
