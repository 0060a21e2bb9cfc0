#include <algorithm>
#include <cmath>

#include <torch/torch.h>

#include "experiments/sync/compressed_sync.h"
#include "experiments/sync/dct_blocks.h"
#include "experiments/sync/gradient_exchange.h"
#include "experiments/sync/synchronizer.h"
#include "experiments/sync/tensor_norms.h"
#include "hyperparams/rules.h"

namespace gcrun::experiments {
namespace {

struct DemoOptions {
  double momentum_decay = 0.999;
  int64_t block = 64;
  int64_t topk = 32;
};

// A DCT block of side n costs an n x n matrix per tensor dimension (computed in float64): DeMo's
// blocks are 64; 4096, 64 times that, costs 128 MiB per matrix, and sync.block=1e6 would be 8 TB.
constexpr int64_t kMaxBlock = 4096;

hyperparams::Rule<int64_t> blockSide() {
  return {"an integer from 1 to " + std::to_string(kMaxBlock), [](int64_t v) { return v >= 1 && v <= kMaxBlock; }, {}};
}

const hyperparams::SettingsSchema<DemoOptions>& demoSchema() {
  using hyperparams::SettingsSchema;
  static const auto schema =
      SettingsSchema<DemoOptions>()
          .add(&DemoOptions::momentum_decay, "momentum_decay", hyperparams::fraction(),
               "demo: beta of each worker's local momentum, delta <- beta delta + gradient.")
          .add(&DemoOptions::block, "block", blockSide(),
               "demo: the DCT block's side at most; each dimension takes its largest divisor up to this.")
          .add(&DemoOptions::topk, "topk", hyperparams::integerAtLeast(1),
               "demo: DCT coefficients of largest magnitude sent per block (at most the block's elements).");
  return schema;
}

// DeMo, decoupled momentum (Peng et al., arXiv 2411.19870). Every step, after backward, each
// worker adds its local gradient (clipped, as the task says) into its momentum δ ← β δ + g (the
// reference adds lr g: with a constant lr that only scales δ, and the sign step below is the same;
// under a schedule the reference weighs each gradient by its step's lr, this does not). Each
// parameter's δ is cut into DCT blocks (dct_blocks.h); each block keeps its `topk` coefficients of
// largest magnitude, whose inverse DCT is taken out of δ. Every worker's (int32 positions, float32
// values) are all-gathered (no reducer), summed into zero coefficient blocks, divided by the
// workers and inverse-transformed (linear: the average of the decoded payloads), and the gradient
// buffer becomes the sign of that (sign(0) = 0). The trainer's SGD then steps by lr times it, with
// its weight decay: validate() refuses the optimizer settings that would change that step. Every
// worker applies the same step, so the models stay identical. Checkpoint entries:
// demo/momentum/<parameter>.
class Demo : public Synchronizer {
 public:
  explicit Demo(const SyncContext& context)
      : options_(demoSchema().read(context.config.sync.settings)),
        comm_(context.comm),
        params_(context.params),
        names_(context.names),
        gradients_(context.buffers.gradients),
        momenta_(context.buffers.memories),
        exchange_(context.params, context.names, context.buffers, context.reducer,
                  GradientExchange::Options{false, context.clip_norm, true}, context.before_send),
        sent_norms_(context.params.size()) {
    for (const auto& p : params_) dcts_.emplace_back(p.sizes(), options_.block, p.scalar_type());
  }

  void beforeBackward(bool sample) override {
    sampling_ = sample;
    exchange_.startStep(sample, /*exchange=*/false);
  }
  uint64_t afterBackward() override {
    torch::NoGradGuard no_grad;
    exchange_.keepLocal();
    std::vector<at::Tensor> positions, values;
    for (size_t i = 0; i < params_.size(); ++i) {
      auto [kept_at, kept] = compressMomentum(i);
      positions.push_back(std::move(kept_at));
      values.push_back(std::move(kept));
    }
    uint64_t bits = 0;
    const auto all_positions = allgatherParts(comm_, positions, bits);
    const auto all_values = allgatherParts(comm_, values, bits);
    for (size_t i = 0; i < params_.size(); ++i) {
      auto sum = at::zeros({dcts_[i].blocks() * dcts_[i].blockElements()}, gradients_[i].options());
      for (size_t w = 0; w < all_values.size(); ++w) {
        sum.index_add_(0, all_positions[w][i].to(at::kLong), all_values[w][i].to(sum.scalar_type()));
      }
      const auto average = dcts_[i].inverse(sum.div_(comm_.size()));
      if (!std::isfinite(average.sum().item<double>())) {
        throw NonFiniteGradient("the averaged momentum of '" + names_[i] + "' is not finite (nan or inf)");
      }
      gradients_[i].copy_(average.sign());
    }
    last_sync_ = SyncEvent{bits, std::nullopt};
    return bits;
  }
  uint64_t afterStep(int64_t /*step*/) override { return 0; }

  void beforeEvaluation() override {}
  void afterEvaluation() override {}
  // Every step sends the payload; the models never drift apart.
  std::optional<SyncEvent> lastSync() const override { return last_sync_; }

  // What a step sends is the kept coefficients (whose norm is that of their inverse DCT: the
  // transform is orthonormal); what it loses, the momentum left behind.
  std::optional<SyncSample> sample() const override {
    const auto& norms = exchange_.sampledNorms();
    if (!norms) return std::nullopt;
    return SyncSample{norms->gradient, globalNorm(sent_norms_), globalNorm(momenta_), true};
  }
  LayerSample layerSample() const override {
    if (!exchange_.sampledNorms()) return {};
    std::vector<at::Tensor> momentum_norms;
    std::vector<reducers::Reducer::TensorCost> costs;
    for (size_t i = 0; i < momenta_.size(); ++i) {
      momentum_norms.push_back(momenta_[i].norm());
      costs.push_back({64 * static_cast<uint64_t>(dcts_[i].blocks() * keptPerBlock(i)), 0});
    }
    return {exchange_.sampledLayerNorms().gradient, doublesOf(sent_norms_), doublesOf(momentum_norms),
            std::move(costs)};
  }

  void saveState(TensorMap& state) const override {
    for (size_t i = 0; i < names_.size(); ++i) state["demo/momentum/" + names_[i]] = momenta_[i];
  }
  bool checksEntry(const std::string& /*name*/) const override { return false; }
  void loadState(const TensorMap& state) override {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < names_.size(); ++i) momenta_[i].copy_(state.at("demo/momentum/" + names_[i]));
  }

 private:
  int64_t keptPerBlock(size_t i) const { return std::min(options_.topk, dcts_[i].blockElements()); }

  // δ_i updated with the step's gradient, its top coefficients per block taken out of it: returns
  // them as (int32 positions in the flattened coefficients, float32 values).
  std::pair<at::Tensor, at::Tensor> compressMomentum(size_t i) {
    momenta_[i].mul_(options_.momentum_decay).add_(gradients_[i]);
    const auto& dct = dcts_[i];
    const auto coefficients = dct.forward(momenta_[i]);
    const auto kept_at = std::get<1>(coefficients.abs().topk(keptPerBlock(i), 1));
    const auto kept = coefficients.gather(1, kept_at);
    momenta_[i].sub_(dct.inverse(at::zeros_like(coefficients).scatter_(1, kept_at, kept)));
    if (sampling_) sent_norms_[i] = kept.norm();
    const auto block_starts = at::arange(dct.blocks()).mul(dct.blockElements()).unsqueeze(1);
    return {kept_at.add(block_starts).flatten().to(at::kInt), kept.flatten().to(at::kFloat)};
  }

  const DemoOptions options_;
  comm::Communicator& comm_;
  const std::vector<at::Tensor>& params_;
  const std::vector<std::string>& names_;
  const std::vector<at::Tensor>& gradients_;
  const std::vector<at::Tensor>& momenta_;  // δ, each worker's own
  GradientExchange exchange_;
  std::vector<DctBlocks> dcts_;
  bool sampling_ = false;
  std::vector<at::Tensor> sent_norms_;  // on sampled steps
  std::optional<SyncEvent> last_sync_;
};

// The trainer's SGD must step by exactly lr * sign(...) plus its weight decay.
void validateDemo(const ExperimentConfig& config) {
  const auto& optimizer = config.optimizer;
  using hyperparams::formatNumber;
  StrategyRequirements requirements("demo", "as the run 'demo' of study gpt-sync has them");
  requireNoReducer(requirements, config, "demo", "DCT top-k");
  requirements
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

// Each parameter's DCT matrices C_r and C_c (dct_blocks.h), computed in float64 and kept as float:
// at most sync.block on a side, and at most the tensor's rows and columns.
double dctMemory(const ExperimentConfig& config, const tasks::ModelSize& model) {
  const double block = static_cast<double>(demoSchema().read(config.sync.settings).block);
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
  return {[](const SyncContext& c) { return std::make_unique<Demo>(c); },
          demoSchema().specs(),
          false,
          validateDemo,
          dctMemory,
          [](const ExperimentConfig&) { return everyStepSchedule("demo"); }};
}

}  // namespace gcrun::experiments
