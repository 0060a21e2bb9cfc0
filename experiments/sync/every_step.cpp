#include <torch/torch.h>

#include "experiments/sync/gradient_exchange.h"
#include "experiments/sync/reducer_state.h"
#include "experiments/sync/synchronizer.h"

namespace gcrun::experiments {
namespace {

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
        exchange_(context.params, context.names, context.buffers, context.reducer, reducerExchangeOptions(context),
                  context.before_send) {}

  void beforeBackward(bool sample) override { exchange_.startStep(sample); }
  uint64_t afterBackward() override { return exchange_.reduce(); }
  uint64_t afterStep(int64_t /*step*/) override { return 0; }
  void beforeEvaluation() override {}
  void afterEvaluation() override {}
  std::optional<SyncEvent> lastSync() const override { return std::nullopt; }

  std::optional<SyncSample> sample() const override {
    return sampleOf(exchange_, memories_, lossless_, config_.optimizer.memory);
  }
  LayerSample layerSample() const override {
    return layerSampleOf(exchange_, memories_, lossless_, reducer_.lastCosts());
  }

  void saveState(TensorMap& state) const override { saveReducerState(state, names_, memories_, reducer_); }
  bool checksEntry(const std::string& name) const override { return isReducerEntry(name); }
  void loadState(const TensorMap& state) override { loadReducerState(state, names_, memories_, reducer_); }

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
