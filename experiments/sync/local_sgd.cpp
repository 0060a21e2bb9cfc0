#include <torch/torch.h>

#include "experiments/sync/gradient_exchange.h"
#include "experiments/sync/reducer_state.h"
#include "experiments/sync/replicas.h"
#include "experiments/sync/sync_settings.h"
#include "experiments/sync/synchronizer.h"

namespace gcrun::experiments {
namespace {

struct LocalSgdOptions {
  int64_t every = 8;
  int64_t warmup_steps = 0;
  bool drift = true;
};

const hyperparams::SettingsSchema<LocalSgdOptions>& localSgdSchema() {
  static const auto schema =
      withDrift(withPeriod(hyperparams::SettingsSchema<LocalSgdOptions>(), &LocalSgdOptions::every),
                &LocalSgdOptions::drift)
          .add(&LocalSgdOptions::warmup_steps, "warmup_steps", hyperparams::integerAtLeast(0),
               "local-sgd: the first this many steps exchange gradients through the reducer every step "
               "(PyTorch's post-local SGD warm-up).");
  return schema;
}

// PyTorch 1.13's post-local SGD: DDP with post_localSGD_hook (post_local_gradient_allreduce off)
// under PostLocalSGDOptimizer with a PeriodicModelAverager(every, warmup_steps). The first
// warmup_steps steps send their gradients through the configured reducer, with error feedback, as
// every-step does (PyTorch's hook all-reduces them exactly: the exact reducer is that); after
// them each worker steps along its own gradient, and after step n the parameters are averaged
// exactly, as PyTorch does, when n - 1 - warmup_steps is a multiple of `every` (its averager's
// counter is n - 1). The optimizer's state stays each worker's own. Checkpoint entries: those of
// every-step (the warm-up's error feedback and reducer) and local-sgd/steps.
class LocalSgd : public Synchronizer {
 public:
  explicit LocalSgd(const SyncContext& context)
      : options_(localSgdSchema().read(context.config.sync.settings)),
        error_feedback_(context.config.optimizer.memory),
        comm_(context.comm),
        reducer_(context.reducer),
        lossless_(context.lossless_reducer),
        params_(context.params),
        names_(context.names),
        memories_(context.buffers.memories),
        exchange_(context.params, context.names, context.buffers, context.reducer,
                  GradientExchange::Options{error_feedback_, context.clip_norm, lossless_}, context.before_send),
        evaluated_(context.params) {}

  void beforeBackward(bool sample) override { exchange_.startStep(sample, warmingUp(steps_ + 1)); }

  uint64_t afterBackward() override {
    reduced_ = warmingUp(steps_ + 1);
    if (reduced_) return exchange_.reduce();
    exchange_.keepLocal();
    return 0;
  }

  uint64_t afterStep(int64_t step) override {
    steps_ = step;
    last_sync_.reset();
    if (averagesAfter(step)) {
      last_sync_ = measuredSync(comm_, params_, options_.drift, [this] { return averageParameters(comm_, params_); });
    }
    return last_sync_ ? last_sync_->bits : 0;
  }

  // The replicas' average is evaluated (not counted as sent: it is no part of training).
  void beforeEvaluation() override {
    if (steps_ == 0 || warmingUp(steps_) || averagesAfter(steps_)) return;  // the replicas agree
    auto average = copiesOf(params_);
    averageParameters(comm_, average);
    evaluated_.swapIn(average);
  }
  void afterEvaluation() override { evaluated_.restore(); }
  std::optional<SyncEvent> lastSync() const override { return last_sync_; }

  std::optional<SyncSample> sample() const override {
    return sampleOf(exchange_, memories_, lossless_, error_feedback_);
  }
  LayerSample layerSample() const override {
    return layerSampleOf(exchange_, memories_, lossless_,
                         reduced_ ? reducer_.lastCosts() : std::vector<reducers::Reducer::TensorCost>{});
  }

  void saveState(TensorMap& state) const override {
    saveReducerState(state, names_, memories_, reducer_);
    state[kSteps] = torch::tensor(steps_, torch::kInt64);
  }
  bool checksEntry(const std::string& name) const override { return isReducerEntry(name); }
  void loadState(const TensorMap& state) override {
    loadReducerState(state, names_, memories_, reducer_);
    const int64_t step = savedStep(state);
    steps_ = checkpointCount(state, kSteps, step, step);  // afterStep() counts every step
  }

 private:
  static constexpr const char* kSteps = "local-sgd/steps";

  bool warmingUp(int64_t step) const { return step <= options_.warmup_steps; }
  bool averagesAfter(int64_t step) const {
    const int64_t counter = step - 1 - options_.warmup_steps;
    return counter >= 0 && counter % options_.every == 0;
  }

  const LocalSgdOptions options_;
  const bool error_feedback_;
  comm::Communicator& comm_;
  reducers::Reducer& reducer_;
  const bool lossless_;
  const std::vector<at::Tensor>& params_;
  const std::vector<std::string>& names_;
  const std::vector<at::Tensor>& memories_;
  GradientExchange exchange_;
  EvaluatedModel evaluated_;
  int64_t steps_ = 0;     // the steps done
  bool reduced_ = false;  // the last step went through the reducer
  std::optional<SyncEvent> last_sync_;
};

}  // namespace

SynchronizerSpec localSgdSpec() {
  // The average's copy of the parameters at a sync.
  return {[](const SyncContext& c) { return std::make_unique<LocalSgd>(c); },
          localSgdSchema().specs(),
          true,
          {},
          [](const ExperimentConfig&, const tasks::ModelSize& model) { return parameterCopies(1, model); },
          [](const ExperimentConfig& config) {
            const auto options = localSgdSchema().read(config.sync.settings);
            auto schedule = periodicSchedule("local-sgd", options.every);
            schedule.warmup_steps = options.warmup_steps;
            return schedule;
          },
          // After the warm-up (planned as its steady state): averageParameters, exact and float32.
          [](const ExperimentConfig&) { return SyncPlan{SyncPlan::Exchange::parameter_average}; }};
}

}  // namespace gcrun::experiments
