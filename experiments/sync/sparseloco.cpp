#include <cmath>

#include <torch/torch.h>

#include "experiments/sync/global_model_sync.h"
#include "experiments/sync/reducer_state.h"
#include "experiments/sync/replicas.h"
#include "experiments/sync/sync_settings.h"
#include "experiments/sync/synchronizer.h"

namespace gcrun::experiments {
namespace {

struct SparseLocoOptions {
  int64_t every = 32;
  bool drift = true;
  double error_decay = 0.95;
  double outer_learning_rate = 1.0;
};

const hyperparams::SettingsSchema<SparseLocoOptions>& sparseLocoSchema() {
  using hyperparams::SettingsSchema;
  static const auto schema =
      withDrift(withPeriod(SettingsSchema<SparseLocoOptions>(), &SparseLocoOptions::every), &SparseLocoOptions::drift)
          .add(&SparseLocoOptions::error_decay, "error_decay", hyperparams::numberFromTo(0, 1),
               "sparseloco: beta, the decay of the error-feedback accumulator before each sync's "
               "pseudo-gradient is added to it.")
          .add(&SparseLocoOptions::outer_learning_rate, "outer_learning_rate", hyperparams::numberAbove(0),
               "sparseloco: the outer step's learning rate on the reducer's average of the workers' accumulators.");
  return schema;
}

// SparseLoCo (Sarfi et al., arXiv 2508.15706): DiLoCo whose outer momentum is replaced by an
// error-feedback accumulator e per worker (the gradient buffers' memories). Every worker runs
// `every` steps of the trainer's optimizer alone from the global model θ_g; then e ← β e + (θ_g − θ)
// is what it sends through the trainer's reducer, which leaves in e what the send lost (its
// memory) and delivers the workers' average; θ_g moves by −outer_learning_rate times it and every
// worker restarts from θ_g, which is evaluated. SparseLoCo's own codec is the reducer two-bit-topk
// (chunk-wise top-k at two levels); with a lossless reducer (exact) all of e is sent, e is left
// zero, and this is DiLoCo with an outer step of plain SGD. Checkpoint entries:
// sparseloco/global/<parameter>, sparseloco/error/<parameter>, sparseloco/syncs and the reducer's
// own, sparseloco/reducer/<entry>.
class SparseLoco : public GlobalModelSync {
 public:
  explicit SparseLoco(const SyncContext& context)
      : SparseLoco(context, sparseLocoSchema().read(context.config.sync.settings)) {}

  // What a sync leaves unsent is e, reported as what the sends lost.
  std::optional<SyncSample> sample() const override {
    return sampleOf(exchange_, errors_, /*lossless=*/false, /*error_feedback=*/true);
  }
  LayerSample layerSample() const override {
    return layerSampleOf(exchange_, errors_, /*lossless=*/false,
                         lastSync() ? reducer_.lastCosts() : std::vector<reducers::Reducer::TensorCost>{});
  }

  void saveState(TensorMap& state) const override {
    for (size_t i = 0; i < names_.size(); ++i) {
      state["sparseloco/global/" + names_[i]] = global_[i];
      state["sparseloco/error/" + names_[i]] = errors_[i];
    }
    state[kSyncs] = torch::tensor(syncs_, torch::kInt64);
    saveReducerEntries(state, reducer_, kPrefix);
  }
  bool checksEntry(const std::string& name) const override { return isReducerEntry(name, kPrefix); }
  // θ_g and the syncs, which every worker has alike; its error feedback is each worker's own.
  bool sharedEntry(const std::string& name) const override {
    return name.rfind("sparseloco/global/", 0) == 0 || name == kSyncs;
  }
  void loadState(const TensorMap& state) override {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < names_.size(); ++i) {
      global_[i].copy_(state.at("sparseloco/global/" + names_[i]));
      errors_[i].copy_(state.at("sparseloco/error/" + names_[i]));
    }
    syncs_ = checkpointCount(state, kSyncs, 0, savedStep(state));  // at most one a step
    loadReducerEntries(state, reducer_, kPrefix);
  }

 private:
  static constexpr const char* kSyncs = "sparseloco/syncs";
  static constexpr const char* kPrefix = "sparseloco/";

  SparseLoco(const SyncContext& context, const SparseLocoOptions& options)
      : GlobalModelSync(context, GradientExchange::Options{false, context.clip_norm, true}, options.every,
                        options.drift),
        options_(options),
        names_(context.names),
        gradients_(context.buffers.gradients),
        errors_(context.buffers.memories),
        reducer_(context.reducer),
        lossless_(context.lossless_reducer) {}

  // The header's algorithm; the average lands in the gradient buffers (free once the optimizer
  // stepped). Returns the bits sent.
  uint64_t outerStep(int64_t /*step*/) override {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) {
      errors_[i].mul_(options_.error_decay).add_(global_[i] - params_[i].detach());
      // Checked here: a top-k codec would hide a nan or inf of the pseudo-gradient.
      if (!std::isfinite(errors_[i].sum().item<double>())) {
        throw NonFiniteGradient("the pseudo-gradient of '" + names_[i] + "' is not finite (nan or inf)");
      }
    }
    const uint64_t bits = sendErrors();
    for (size_t i = 0; i < params_.size(); ++i) global_[i].add_(gradients_[i], -options_.outer_learning_rate);
    ++syncs_;
    copyInto(params_, global_);
    checkGlobalModel(global_, names_);
    return bits;
  }

  // e through the reducer: its average into the gradient buffers, what the send lost left in e. A
  // lossless reducer averages in place (reducer.h) and loses nothing: e, all sent, becomes zero.
  uint64_t sendErrors() {
    if (!lossless_) return reducer_.reduce(errors_, gradients_, errors_);
    for (size_t i = 0; i < params_.size(); ++i) gradients_[i].copy_(errors_[i]);
    const uint64_t bits = reducer_.reduce(gradients_, gradients_, errors_);
    for (const auto& e : errors_) e.zero_();
    return bits;
  }

  const SparseLocoOptions options_;
  const std::vector<std::string>& names_;
  const std::vector<at::Tensor>& gradients_;
  const std::vector<at::Tensor>& errors_;  // e, the error-feedback accumulator
  reducers::Reducer& reducer_;
  const bool lossless_;
  int64_t syncs_ = 0;
};

}  // namespace

SynchronizerSpec sparseLocoSpec() {
  // θ_g and the replicas' mean while the drift is measured (the accumulator is the memory buffer).
  return {[](const SyncContext& c) { return std::make_unique<SparseLoco>(c); },
          sparseLocoSchema().specs(),
          true,
          {},
          [](const ExperimentConfig&, const tasks::ModelSize& model) { return parameterCopies(2, model); },
          [](const ExperimentConfig& config) {
            return periodicSchedule("sparseloco", sparseLocoSchema().read(config.sync.settings).every);
          },
          // The whole model's accumulator through the reducer, as diloco's pseudo-gradient.
          [](const ExperimentConfig&) { return SyncPlan{}; }};
}

}  // namespace gcrun::experiments
