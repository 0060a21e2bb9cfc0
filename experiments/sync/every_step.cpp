#include <stdexcept>

#include <torch/torch.h>

#include "experiments/sync/gradient_exchange.h"
#include "experiments/sync/synchronizer.h"
#include "experiments/sync/tensor_norms.h"
#include "hyperparams/base/errors.h"

namespace gcrun::experiments {
namespace {

bool startsWith(const std::string& name, const std::string& prefix) { return name.rfind(prefix, 0) == 0; }

// The reference's data-parallel step (powersgd.md 1.3): every step, each worker's gradient (plus
// its error feedback) goes through the reducer during backward, and the optimizer steps along the
// average. Its checkpoint entries: memory/<parameter> (error feedback) and reducer/<entry>.
class EveryStep : public Synchronizer {
 public:
  explicit EveryStep(const SyncContext& context)
      : config_(context.config),
        reducer_(context.reducer),
        lossless_(context.lossless_reducer),
        names_(context.names),
        memories_(context.buffers.memories),
        exchange_(
            context.params, context.names, context.buffers, context.reducer,
            GradientExchange::Options{context.config.optimizer.memory, context.clip_norm, context.lossless_reducer},
            context.before_send) {}

  void beforeBackward(bool sample) override { exchange_.startStep(sample); }
  uint64_t afterBackward() override { return exchange_.reduce(); }
  uint64_t afterStep(int64_t /*step*/) override { return 0; }
  void beforeEvaluation() override {}
  void afterEvaluation() override {}

  // A lossless reducer's memory is always zero: it loses nothing.
  std::optional<SyncSample> sample() const override {
    const auto& norms = exchange_.sampledNorms();
    if (!norms) return std::nullopt;
    SyncSample sample{norms->gradient, norms->send, std::nullopt, config_.optimizer.memory};
    if (!lossless_) sample.lost = globalNorm(memories_);
    return sample;
  }

  LayerSample layerSample() const override {
    auto norms = exchange_.sampledLayerNorms();
    std::vector<double> lost(names_.size(), 0.0);
    if (!lossless_) {
      std::vector<at::Tensor> memory_norms;
      for (const auto& m : memories_) memory_norms.push_back(m.norm());
      lost = doublesOf(memory_norms);
    }
    return {std::move(norms.gradient), std::move(norms.send), std::move(lost), reducer_.lastCosts()};
  }

  void saveState(TensorMap& state) const override {
    for (size_t i = 0; i < names_.size(); ++i) state["memory/" + names_[i]] = memories_[i];
    reducers::Reducer::State reducer_state;
    reducer_.saveState(reducer_state);
    for (const auto& kv : reducer_state) state["reducer/" + kv.first] = kv.second;
  }

  // The reducer's entries: its loadState() asks for them by name.
  bool checksEntry(const std::string& name) const override { return startsWith(name, "reducer/"); }

  void loadState(const TensorMap& state) override {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < names_.size(); ++i) memories_[i].detach().copy_(state.at("memory/" + names_[i]));
    reducers::Reducer::State reducer_state;
    for (const auto& kv : state) {
      if (startsWith(kv.first, "reducer/")) reducer_state[kv.first.substr(8)] = kv.second;
    }
    try {
      reducer_.loadState(reducer_state);
    } catch (const std::invalid_argument& e) {
      throw UserError(std::string("checkpoint: ") + e.what());
    }
  }

 private:
  const ExperimentConfig& config_;
  reducers::Reducer& reducer_;
  const bool lossless_;
  const std::vector<std::string>& names_;
  const std::vector<at::Tensor>& memories_;
  GradientExchange exchange_;
};

}  // namespace

std::unique_ptr<Synchronizer> makeEveryStep(const SyncContext& context) { return std::make_unique<EveryStep>(context); }

}  // namespace gcrun::experiments
