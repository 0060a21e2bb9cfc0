#include <algorithm>
#include <cmath>

#include <torch/torch.h>

#include "experiments/sync/gradient_exchange.h"
#include "experiments/sync/strategy_requirements.h"
#include "experiments/sync/synchronizer.h"
#include "experiments/sync/tensor_norms.h"
#include "hyperparams/rules.h"
#include "reducers/dct_blocks.h"

namespace gcrun::experiments {
namespace {

struct DemoOptions {
  double momentum_decay = 0.999;
};

const hyperparams::SettingsSchema<DemoOptions>& demoSchema() {
  using hyperparams::SettingsSchema;
  static const auto schema =
      SettingsSchema<DemoOptions>().add(&DemoOptions::momentum_decay, "momentum_decay", hyperparams::fraction(),
                                        "demo: beta of each worker's local momentum, delta <- beta delta + gradient.");
  return schema;
}

// DeMo, decoupled momentum (Peng et al., arXiv 2411.19870). Every step, after backward, each
// worker adds its local gradient (clipped, as the task says) into its momentum δ ← β δ + g (the
// reference adds lr g: with a constant lr that only scales δ, and the sign step below is the same;
// under a schedule the reference weighs each gradient by its step's lr, this does not). δ goes
// through the trainer's reducer, which leaves in δ what the send lost (its memory) and delivers
// the workers' average, and the gradient buffer becomes the sign of that (sign(0) = 0). DeMo's own
// codec is the reducer dct-topk (top-k DCT coefficients per block); with a lossless reducer
// (exact) all of δ is sent and δ is left zero, so each step is the sign of the averaged gradient
// (signSGD of the average). The trainer's SGD then steps by lr times it, with its weight decay:
// validate() refuses the optimizer settings that would change that step. Every worker applies the
// same step, so the models stay identical. Checkpoint entries: demo/momentum/<parameter> and the
// reducer's own, demo/reducer/<entry>.
class Demo : public Synchronizer {
 public:
  explicit Demo(const SyncContext& context)
      : options_(demoSchema().read(context.config.sync.settings)),
        params_(context.params),
        names_(context.names),
        gradients_(context.buffers.gradients),
        momenta_(context.buffers.memories),
        reducer_(context.reducer),
        lossless_(context.lossless_reducer),
        exchange_(context.params, context.names, context.buffers, context.reducer,
                  GradientExchange::Options{false, context.clip_norm, true}, context.before_send),
        sent_norms_(context.params.size()) {}

  void beforeBackward(bool sample) override {
    sampling_ = sample;
    exchange_.startStep(sample, /*exchange=*/false);
  }
  uint64_t afterBackward() override {
    torch::NoGradGuard no_grad;
    exchange_.keepLocal();
    std::vector<at::Tensor> before_send;
    for (size_t i = 0; i < params_.size(); ++i) {
      momenta_[i].mul_(options_.momentum_decay).add_(gradients_[i]);
      if (sampling_) before_send.push_back(momenta_[i].clone());
    }
    const uint64_t bits = sendMomenta();
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!std::isfinite(gradients_[i].sum().item<double>())) {
        throw NonFiniteGradient("the averaged momentum of '" + names_[i] + "' is not finite (nan or inf)");
      }
      gradients_[i].sign_();
      // What the send delivered for this worker: what it took out of δ.
      if (sampling_) sent_norms_[i] = before_send[i].sub_(momenta_[i]).norm();
    }
    last_sync_ = SyncEvent{bits, std::nullopt};
    return bits;
  }
  uint64_t afterStep(int64_t /*step*/) override { return 0; }

  void beforeEvaluation() override {}
  void afterEvaluation() override {}
  // Every step sends the payload; the models never drift apart.
  std::optional<SyncEvent> lastSync() const override { return last_sync_; }

  // What a step sends is what the reducer took out of δ (with dct-topk the inverse DCT of the kept
  // coefficients); what it loses, the momentum left behind.
  std::optional<SyncSample> sample() const override {
    const auto& norms = exchange_.sampledNorms();
    if (!norms) return std::nullopt;
    return SyncSample{norms->gradient, globalNorm(sent_norms_), globalNorm(momenta_), true};
  }
  LayerSample layerSample() const override {
    if (!exchange_.sampledNorms()) return {};
    std::vector<at::Tensor> momentum_norms;
    for (const auto& m : momenta_) momentum_norms.push_back(m.norm());
    return {exchange_.sampledLayerNorms().gradient, doublesOf(sent_norms_), doublesOf(momentum_norms),
            reducer_.lastCosts()};
  }

  void saveState(TensorMap& state) const override {
    for (size_t i = 0; i < names_.size(); ++i) state["demo/momentum/" + names_[i]] = momenta_[i];
    saveReducerEntries(state, reducer_, kPrefix);
  }
  bool checksEntry(const std::string& name) const override { return isReducerEntry(name, kPrefix); }
  void loadState(const TensorMap& state) override {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < names_.size(); ++i) momenta_[i].copy_(state.at("demo/momentum/" + names_[i]));
    loadReducerEntries(state, reducer_, kPrefix);
  }

 private:
  static constexpr const char* kPrefix = "demo/";

  // δ through the reducer: its average into the gradient buffers, what the send lost left in δ. A
  // lossless reducer averages in place (reducer.h) and loses nothing: δ, all sent, becomes zero.
  uint64_t sendMomenta() {
    if (!lossless_) return reducer_.reduce(momenta_, gradients_, momenta_);
    for (size_t i = 0; i < params_.size(); ++i) gradients_[i].copy_(momenta_[i]);
    const uint64_t bits = reducer_.reduce(gradients_, gradients_, momenta_);
    for (const auto& m : momenta_) m.zero_();
    return bits;
  }

  const DemoOptions options_;
  const std::vector<at::Tensor>& params_;
  const std::vector<std::string>& names_;
  const std::vector<at::Tensor>& gradients_;
  const std::vector<at::Tensor>& momenta_;  // δ, each worker's own
  reducers::Reducer& reducer_;
  const bool lossless_;
  GradientExchange exchange_;
  bool sampling_ = false;
  std::vector<at::Tensor> sent_norms_;  // on sampled steps
  std::optional<SyncEvent> last_sync_;
};

// The trainer's SGD must step by exactly lr * sign(...) plus its weight decay.
void validateDemo(const ExperimentConfig& config) {
  const auto& optimizer = config.optimizer;
  using hyperparams::formatNumber;
  StrategyRequirements("demo", "as the run 'demo' of study gpt-sync has them")
      .require(optimizer.name == "sgd", "optimizer.name", "sgd", "'" + optimizer.name + "'",
               "demo's step is lr * sign(the averaged momentum), which the sgd optimizer applies")
      .require(optimizer.momentum == 0, "optimizer.momentum", "0", formatNumber(optimizer.momentum),
               "demo keeps its own momentum (sync.momentum_decay) and needs the sgd's off")
      .require(optimizer.momentum_type != MomentumType::nesterov, "optimizer.momentum_type", "heavy-ball", "'nesterov'",
               "the sgd's nesterov form steps along g + m, twice demo's sign step even at momentum 0")
      .require(!optimizer.wd_before_reduce, "optimizer.wd_before_reduce", "false", "true",
               "demo applies the weight decay after its sign step, not into its momentum")
      .require(optimizer.clip_norm <= 0, "optimizer.clip_norm", "0", formatNumber(optimizer.clip_norm),
               "a clip of demo's sign step would shrink it")
      .check();
}

// With DeMo's codec, the reducer dct-topk, each parameter's DCT matrices C_r and C_c
// (reducers/dct_blocks.h), computed in float64 and kept as float: at most reducer.block on a side,
// and at most the tensor's rows and columns. Other reducers hold nothing of the kind.
double dctMemory(const ExperimentConfig& config, const tasks::ModelSize& model) {
  if (config.reducer.name != "dct-topk") return 0;
  const double block = static_cast<double>(reducers::dctTopKBlock(config.reducer.settings));
  double bytes = 0;
  for (const auto& group : model.parameters) {
    double rows = 1, cols = 1;
    for (size_t i = 0; i < group.shape.size(); ++i) (i == 0 && group.shape.size() > 1 ? rows : cols) *= group.shape[i];
    const double side_rows = std::min(rows, block), side_cols = std::min(cols, block);
    bytes += group.count * (side_rows * side_rows + side_cols * side_cols) * (sizeof(double) + sizeof(float));
  }
  return bytes;
}

}  // namespace

SynchronizerSpec demoSpec() {
  return {[](const SyncContext& c) { return std::make_unique<Demo>(c); }, demoSchema().specs(), false, validateDemo,
          dctMemory, [](const ExperimentConfig&) { return everyStepSchedule("demo"); },
          // The momenta through the reducer in one reduce once backward is done (afterBackward).
          [](const ExperimentConfig&) {
            return SyncPlan{SyncPlan::Exchange::reducer, false};
          }};
}

}  // namespace gcrun::experiments
