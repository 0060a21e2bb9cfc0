#include <torch/torch.h>

#include "experiments/sync/global_model_sync.h"
#include "experiments/sync/global_slice.h"
#include "experiments/sync/outer_sgd.h"
#include "experiments/sync/reducer_state.h"
#include "experiments/sync/replicas.h"
#include "experiments/sync/sync_settings.h"
#include "experiments/sync/synchronizer.h"

namespace gcrun::experiments {
namespace {

struct DilocoOptions {
  int64_t every = 32;
  double outer_learning_rate = 0.7;
  double outer_momentum = 0.9;
  bool outer_nesterov = true;
  bool drift = true;
};

const hyperparams::SettingsSchema<DilocoOptions>& dilocoSchema() {
  using hyperparams::SettingsSchema;
  static const auto schema = withOuterSgd(
      withDrift(withPeriod(SettingsSchema<DilocoOptions>(), &DilocoOptions::every), &DilocoOptions::drift));
  return schema;
}

// DiLoCo (Douillard et al., arXiv 2311.08105): every worker starts from the global model θ_g and
// runs `every` steps of the trainer's optimizer alone (its state kept across syncs); then the
// pseudo-gradient θ_g - θ goes through the configured reducer, with error feedback carried from
// sync to sync when optimizer.memory is on, and an outer SGD, PyTorch's torch.optim.SGD op for op
// (outer_sgd.h), applies the average to θ_g, which every worker restarts from. The global model is
// evaluated. Checkpoint entries: every-step's (the pseudo-gradient's error feedback and the
// reducer), diloco/global/<parameter>, and the outer SGD's diloco/momentum/<parameter> and
// diloco/outer_steps.
class Diloco : public GlobalModelSync {
 public:
  explicit Diloco(const SyncContext& context) : Diloco(context, dilocoSchema().read(context.config.sync.settings)) {}

  std::optional<SyncSample> sample() const override {
    return sampleOf(exchange_, whole_.memories, lossless_, error_feedback_);
  }
  LayerSample layerSample() const override {
    return layerSampleOf(exchange_, whole_.memories, lossless_,
                         lastSync() ? whole_.reducer.lastCosts() : std::vector<reducers::Reducer::TensorCost>{});
  }

  void saveState(TensorMap& state) const override {
    saveReducerState(state, whole_.names, whole_.memories, whole_.reducer);
    for (size_t i = 0; i < whole_.names.size(); ++i) state["diloco/global/" + whole_.names[i]] = global_[i];
    whole_.outer_sgd.saveState(state, kPrefix);
  }
  bool checksEntry(const std::string& name) const override { return isReducerEntry(name); }
  // θ_g and the outer SGD's state, which every worker steps alike.
  bool sharedEntry(const std::string& name) const override {
    return name.rfind(kPrefix, 0) == 0 && !isReducerEntry(name);
  }
  void loadState(const TensorMap& state) override {
    loadReducerState(state, whole_.names, whole_.memories, whole_.reducer);
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < whole_.names.size(); ++i) global_[i].copy_(state.at("diloco/global/" + whole_.names[i]));
    whole_.outer_sgd.loadState(state, kPrefix);
  }

 private:
  static constexpr const char* kPrefix = "diloco/";

  Diloco(const SyncContext& context, const DilocoOptions& options)
      : GlobalModelSync(context, reducerExchangeOptions(context), options.every, options.drift),
        error_feedback_(context.config.optimizer.memory),
        lossless_(context.lossless_reducer),
        whole_(context.names, context.params, global_, context.buffers.gradients, context.buffers.memories,
               context.reducer, outerSgdOf(options)) {}

  // The pseudo-gradients through the reducer, the outer step on θ_g along their average, and every
  // worker back at θ_g. Returns the bits sent.
  uint64_t outerStep(int64_t /*step*/) override {
    const uint64_t bits = whole_.sendPseudoGradients(lossless_, error_feedback_);
    whole_.outerStep(whole_.gradients);
    copyInto(params_, global_);
    return bits;
  }

  const bool error_feedback_;
  const bool lossless_;
  GlobalSlice whole_;  // the whole model, through the trainer's reducer
};

}  // namespace

SynchronizerSpec dilocoSpec() {
  // θ_g, the outer momentum, and the replicas' mean while the drift is measured.
  return {[](const SyncContext& c) { return std::make_unique<Diloco>(c); },
          dilocoSchema().specs(),
          true,
          {},
          [](const ExperimentConfig&, const tasks::ModelSize& model) { return parameterCopies(3, model); },
          [](const ExperimentConfig& config) {
            return periodicSchedule("diloco", dilocoSchema().read(config.sync.settings).every);
          },
          // The whole model's pseudo-gradient through the reducer.
          [](const ExperimentConfig&) { return SyncPlan{}; }};
}

}  // namespace gcrun::experiments
