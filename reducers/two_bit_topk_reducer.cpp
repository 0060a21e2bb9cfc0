#include <ATen/ATen.h>

#include "reducers/allgather_parts.h"
#include "reducers/builtin_reducers.h"
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
      // send[i] is read for the last time: memory[i] may be the same tensor.
      memory[i].copy_(send[i] - decodeTwoBitTopK(payload, layouts_[i]).view_as(send[i]));
    }
    uint64_t bits = 0;
    const auto messages = allgatherParts(comm_, parts, bits);
    for (size_t i = 0; i < out.size(); ++i) out[i].zero_();
    for (const auto& worker : messages) {
      for (size_t i = 0; i < out.size(); ++i) {
        out[i].add_(decodeTwoBitTopK(unpackTwoBitTopK(worker[i], layouts_[i]), layouts_[i]).view_as(out[i]));
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
  return {make, CollectiveKind::all_gather, twoBitTopKSettings().specs(), true, {Granularity::layer}, ""};
}

}  // namespace gcrun::reducers
