#include <ATen/ATen.h>

#include "reducers/allgather_parts.h"
#include "reducers/builtin_reducers.h"
#include "reducers/tensor_buffer.h"
#include "reducers/two_bit_topk.h"

namespace gcrun::reducers {
namespace {

struct TwoBitTopKOptions {
  int64_t chunk = 4096;
  double density = 0.02;
};

const hyperparams::SettingsSchema<TwoBitTopKOptions>& twoBitTopKSettings() {
  static const auto schema =
      hyperparams::SettingsSchema<TwoBitTopKOptions>()
          .add(&TwoBitTopKOptions::chunk, "chunk", hyperparams::integerAtLeast(1),
               "two-bit-topk: elements per chunk of a flattened tensor; each chunk keeps its own top-k, and a kept "
               "position costs ceil(log2(chunk)) bits.")
          .add(&TwoBitTopKOptions::density, "density", hyperparams::positiveFraction(),
               "two-bit-topk: the share of each chunk's elements sent, at least one per chunk (SparseLoCo's "
               "production top 64 of 4096: 0.015625).");
  return schema;
}

// SparseLoCo's codec (two_bit_topk.h) as an all-gather reducer: each tensor's chunk-wise top-k at
// two levels per chunk, packed in the published format, all tensors in one message; every
// worker's message is unpacked and decoded, and the decodes added up in rank order into a zero
// output and divided by the workers (SparseLoCo's average, as its strategy computed it before it
// moved here). Memory = send - decode(own): SparseLoCo's error-feedback accumulator keeps what was
// not sent, its quantisation error included. Layer granularity only: chunks follow the tensors.
class TwoBitTopKReducer : public Reducer {
 public:
  TwoBitTopKReducer(Communicator& comm, const TwoBitTopKOptions& options) : comm_(comm), options_(options) {}

  uint64_t reduce(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& out,
                  const std::vector<at::Tensor>& memory) override {
    if (layouts_.empty()) {
      for (const auto& t : send) layouts_.push_back({t.numel(), options_.chunk, options_.density});
    }
    std::vector<at::Tensor> parts;
    for (size_t i = 0; i < send.size(); ++i) {
      const auto payload = encodeTwoBitTopK(send[i], layouts_[i]);
      parts.push_back(packTwoBitTopK(payload, layouts_[i]));
      // Memory = send - decode(own), computed where something was kept: elsewhere x - 0 is x.
      const auto kept = decodeKept(payload, layouts_[i]);
      const auto lost = send[i].reshape({-1}).index_select(0, kept.positions).sub(kept.values);
      memory[i].copy_(send[i]);  // send[i] is read for the last time: memory[i] may be the same tensor
      withFlat(memory[i], [&](const at::Tensor& flat) { flat.index_put_({kept.positions}, lost); });
    }
    uint64_t bits = 0;
    const auto messages = allgatherParts(comm_, parts, bits);
    // The decodes added in rank order at the kept positions of each: the sums 0 + d_0 + d_1 + ...
    // of a dense addition, whose other terms are zeros.
    for (size_t i = 0; i < out.size(); ++i) out[i].zero_();
    for (const auto& worker : messages) {
      for (size_t i = 0; i < out.size(); ++i) {
        const auto kept = decodeKept(unpackTwoBitTopK(worker[i], layouts_[i]), layouts_[i]);
        withFlat(out[i], [&](const at::Tensor& flat) { flat.index_add_(0, kept.positions, kept.values); });
      }
    }
    for (const auto& o : out) o.div_(comm_.size());
    return bits;
  }

  std::vector<TensorCost> lastCosts() const override {
    std::vector<TensorCost> costs;
    for (const auto& layout : layouts_) costs.push_back({twoBitTopKBits(layout), 0});
    return costs;
  }

 private:
  Communicator& comm_;
  const TwoBitTopKOptions options_;
  std::vector<TwoBitTopKLayout> layouts_;  // one per tensor, from the first call's shapes
};

}  // namespace

ReducerSpec twoBitTopKSpec() {
  const auto make = [](const ReducerContext& context) -> std::unique_ptr<Reducer> {
    return std::make_unique<TwoBitTopKReducer>(context.comm, twoBitTopKSettings().read(context.options.settings));
  };
  ReducerSpec spec{make, CollectiveKind::all_gather, twoBitTopKSettings().specs(), true, {Granularity::layer}, ""};
  // Each tensor's packed payload, from its layout (lastCosts()).
  spec.planned_bits = [](const ReducerOptions& options, const TensorShapes& shapes) {
    const auto settings = twoBitTopKSettings().read(options.settings);
    uint64_t bits = 0;
    for (const auto& shape : shapes) {
      bits += twoBitTopKBits({static_cast<int64_t>(elementCount(shape)), settings.chunk, settings.density});
    }
    return bits;
  };
  return spec;
}

}  // namespace gcrun::reducers
