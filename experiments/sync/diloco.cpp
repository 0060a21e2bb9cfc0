#include <cmath>

#include <torch/torch.h>

#include "experiments/sync/gradient_exchange.h"
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
class Diloco : public Synchronizer {
 public:
  explicit Diloco(const SyncContext& context)
      : options_(dilocoSchema().read(context.config.sync.settings)),
        error_feedback_(context.config.optimizer.memory),
        comm_(context.comm),
        reducer_(context.reducer),
        lossless_(context.lossless_reducer),
        params_(context.params),
        names_(context.names),
        gradients_(context.buffers.gradients),
        memories_(context.buffers.memories),
        exchange_(context.params, context.names, context.buffers, context.reducer,
                  GradientExchange::Options{error_feedback_, context.clip_norm, lossless_}, context.before_send),
        evaluated_(context.params),
        global_(copiesOf(context.params)),
        outer_sgd_(outerSgdOf(options_), global_, context.names) {}

  void beforeBackward(bool sample) override { exchange_.startStep(sample, /*exchange=*/false); }
  uint64_t afterBackward() override {
    exchange_.keepLocal();
    return 0;
  }
  uint64_t afterStep(int64_t step) override {
    last_sync_.reset();
    if (step % options_.every == 0)
      last_sync_ = measuredSync(comm_, params_, options_.drift, [this] { return outerStep(); });
    return last_sync_ ? last_sync_->bits : 0;
  }

  void beforeEvaluation() override { evaluated_.swapIn(global_); }
  void afterEvaluation() override { evaluated_.restore(); }
  std::optional<SyncEvent> lastSync() const override { return last_sync_; }

  std::optional<SyncSample> sample() const override {
    return sampleOf(exchange_, memories_, lossless_, error_feedback_);
  }
  LayerSample layerSample() const override {
    return layerSampleOf(exchange_, memories_, lossless_,
                         last_sync_ ? reducer_.lastCosts() : std::vector<reducers::Reducer::TensorCost>{});
  }

  void saveState(TensorMap& state) const override {
    saveReducerState(state, names_, memories_, reducer_);
    for (size_t i = 0; i < names_.size(); ++i) state["diloco/global/" + names_[i]] = global_[i];
    outer_sgd_.saveState(state, kPrefix);
  }
  bool checksEntry(const std::string& name) const override { return isReducerEntry(name); }
  void loadState(const TensorMap& state) override {
    loadReducerState(state, names_, memories_, reducer_);
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < names_.size(); ++i) global_[i].copy_(state.at("diloco/global/" + names_[i]));
    outer_sgd_.loadState(state, kPrefix);
  }

 private:
  static constexpr const char* kPrefix = "diloco/";

  // The pseudo-gradients through the reducer into the gradient buffers (free once the optimizer
  // stepped), the outer step on θ_g, and every worker back at θ_g. Returns the bits sent.
  uint64_t outerStep() {
    torch::NoGradGuard no_grad;
    // What the reducer sends, as every-step hands it: a lossless reducer averages in place.
    const auto& sends = lossless_ ? gradients_ : memories_;
    for (size_t i = 0; i < params_.size(); ++i) {
      if (lossless_ || !error_feedback_) {
        sends[i].copy_(global_[i]).sub_(params_[i].detach());
      } else {
        sends[i].add_(global_[i] - params_[i].detach());
      }
    }
    const uint64_t bits = reducer_.reduce(sends, gradients_, memories_);
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!std::isfinite(gradients_[i].sum().item<double>())) {
        throw NonFiniteGradient("the averaged pseudo-gradient of '" + names_[i] + "' is not finite (nan or inf)");
      }
    }
    outer_sgd_.step(gradients_);
    copyInto(params_, global_);
    return bits;
  }

  const DilocoOptions options_;
  const bool error_feedback_;
  comm::Communicator& comm_;
  reducers::Reducer& reducer_;
  const bool lossless_;
  const std::vector<at::Tensor>& params_;
  const std::vector<std::string>& names_;
  const std::vector<at::Tensor>& gradients_;
  const std::vector<at::Tensor>& memories_;
  GradientExchange exchange_;
  EvaluatedModel evaluated_;
  std::vector<at::Tensor> global_;      // θ_g
  OuterSgd outer_sgd_;                  // on θ_g
  std::optional<SyncEvent> last_sync_;  // the last step's, if it synced
};

}  // namespace

SynchronizerSpec dilocoSpec() {
  return {[](const SyncContext& c) { return std::make_unique<Diloco>(c); }, dilocoSchema().specs(), true, {}};
}

}  // namespace gcrun::experiments
