#include <algorithm>

#include <ATen/ATen.h>

#include "hyperparams/rules.h"
#include "reducers/allgather_parts.h"
#include "reducers/builtin_reducers.h"
#include "reducers/dct_blocks.h"

namespace gcrun::reducers {
namespace {

struct DctTopKOptions {
  int64_t block = 64;
  int64_t topk = 32;
};

hyperparams::Rule<int64_t> blockSide() {
  return {"an integer from 1 to " + std::to_string(kMaxDctBlock),
          [](int64_t v) { return v >= 1 && v <= kMaxDctBlock; },
          {}};
}

const hyperparams::SettingsSchema<DctTopKOptions>& dctTopKSettings() {
  static const auto schema =
      hyperparams::SettingsSchema<DctTopKOptions>()
          .add(&DctTopKOptions::block, "block", blockSide(),
               "dct-topk: the DCT block's side at most; each dimension takes its largest divisor up to this.")
          .add(&DctTopKOptions::topk, "topk", hyperparams::integerAtLeast(1),
               "dct-topk: DCT coefficients of largest magnitude sent per block (at most the block's elements).");
  return schema;
}

// What a tensor of `grid` sends keeping `topk` coefficients a block: each one's int64 position
// within its block and its float32 value.
uint64_t dctTopKBits(const DctGrid& grid, int64_t topk) {
  constexpr uint64_t kCoefficientBits = 8 * (sizeof(int64_t) + sizeof(float));
  return kCoefficientBits * static_cast<uint64_t>(grid.blocks() * std::min(topk, grid.blockElements()));
}

// DeMo's codec (Peng et al., arXiv 2411.19870; bloc97/DeMo's demo.py) as an all-gather reducer:
// each tensor is cut into DCT blocks (dct_blocks.h), each block keeps its `topk` coefficients of
// largest magnitude. As the reference sends them: each coefficient's position within its block as
// int64 (torch.topk's indices) in one all-gather and its value in one more (float32: the
// reference sends the parameter's dtype); so 96 bits a coefficient. Every worker's coefficients
// are added, rank by rank, into zero coefficient blocks, divided by the workers and
// inverse-transformed (linear: the average of the decoded payloads). Memory = send - the inverse
// of the own kept coefficients: DeMo's momentum keeps what was not sent. Layer granularity only.
class DctTopKReducer : public Reducer {
 public:
  DctTopKReducer(Communicator& comm, const DctTopKOptions& options) : comm_(comm), options_(options) {}

  uint64_t reduce(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& out,
                  const std::vector<at::Tensor>& memory) override {
    if (dcts_.empty()) {
      for (const auto& t : send) dcts_.emplace_back(t.sizes(), options_.block, t.scalar_type());
    }
    std::vector<at::Tensor> positions, values;
    for (size_t i = 0; i < send.size(); ++i) {
      const auto coefficients = dcts_[i].forward(send[i]);
      const auto kept_at = std::get<1>(coefficients.abs().topk(keptPerBlock(i), 1));
      const auto kept = coefficients.gather(1, kept_at);
      // send[i] is read for the last time: memory[i] may be the same tensor.
      memory[i].copy_(send[i] - dcts_[i].inverse(at::zeros_like(coefficients).scatter_(1, kept_at, kept)));
      positions.push_back(kept_at.flatten());
      values.push_back(kept.flatten().to(at::kFloat));
    }
    uint64_t bits = 0;
    const auto all_positions = allgatherParts(comm_, positions, bits);
    const auto all_values = allgatherParts(comm_, values, bits);
    for (size_t i = 0; i < out.size(); ++i) {
      const auto& dct = dcts_[i];
      const auto block_starts = at::arange(dct.blocks()).mul(dct.blockElements()).unsqueeze(1);
      auto sum = at::zeros({dct.blocks() * dct.blockElements()}, out[i].options());
      for (size_t w = 0; w < all_values.size(); ++w) {
        const auto at_in_sum = all_positions[w][i].view({dct.blocks(), -1}).add(block_starts).flatten();
        sum.index_add_(0, at_in_sum, all_values[w][i].to(sum.scalar_type()));
      }
      out[i].copy_(dct.inverse(sum.div_(comm_.size())));
    }
    return bits;
  }

  std::vector<TensorCost> lastCosts() const override {
    std::vector<TensorCost> costs;
    for (const auto& dct : dcts_) costs.push_back({dctTopKBits(dct.grid(), options_.topk), 0});
    return costs;
  }

 private:
  int64_t keptPerBlock(size_t i) const { return std::min(options_.topk, dcts_[i].blockElements()); }

  Communicator& comm_;
  const DctTopKOptions options_;
  std::vector<DctBlocks> dcts_;  // one per tensor, from the first call's shapes
};

}  // namespace

int64_t dctTopKBlock(const SettingValues& settings) { return dctTopKSettings().read(settings).block; }

ReducerSpec dctTopKSpec() {
  const auto make = [](const ReducerContext& context) -> std::unique_ptr<Reducer> {
    return std::make_unique<DctTopKReducer>(context.comm, dctTopKSettings().read(context.options.settings));
  };
  ReducerSpec spec{make, CollectiveKind::all_gather, dctTopKSettings().specs(), true, {Granularity::layer}, ""};
  // Each tensor's kept coefficients, from its blocks alone (lastCosts()).
  spec.planned_bits = [](const ReducerOptions& options, const TensorShapes& shapes) {
    const auto settings = dctTopKSettings().read(options.settings);
    uint64_t bits = 0;
    for (const auto& shape : shapes) bits += dctTopKBits(dctGridOf(shape, settings.block), settings.topk);
    return bits;
  };
  return spec;
}

}  // namespace gcrun::reducers
