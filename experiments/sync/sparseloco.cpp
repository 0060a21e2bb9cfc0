#include <cmath>

#include <torch/torch.h>

#include "experiments/sync/compressed_sync.h"
#include "experiments/sync/global_model_sync.h"
#include "experiments/sync/reducer_state.h"
#include "experiments/sync/replicas.h"
#include "experiments/sync/sync_settings.h"
#include "experiments/sync/synchronizer.h"
#include "experiments/sync/two_bit_topk.h"

namespace gcrun::experiments {
namespace {

struct SparseLocoOptions {
  int64_t every = 32;
  bool drift = true;
  int64_t chunk = 4096;
  double density = 0.02;
  double error_decay = 0.95;
  double outer_learning_rate = 1.0;
};

const hyperparams::SettingsSchema<SparseLocoOptions>& sparseLocoSchema() {
  using hyperparams::SettingsSchema;
  static const auto schema =
      withDrift(withPeriod(SettingsSchema<SparseLocoOptions>(), &SparseLocoOptions::every), &SparseLocoOptions::drift)
          .add(&SparseLocoOptions::chunk, "chunk", hyperparams::integerAtLeast(1),
               "sparseloco: elements per chunk of a flattened parameter; each chunk keeps its own top-k.")
          .add(&SparseLocoOptions::density, "density", hyperparams::positiveFraction(),
               "sparseloco: the share of each chunk's elements sent (at least one per chunk).")
          .add(&SparseLocoOptions::error_decay, "error_decay", hyperparams::numberFromTo(0, 1),
               "sparseloco: beta, the decay of the error-feedback accumulator before each sync's "
               "pseudo-gradient is added to it.")
          .add(&SparseLocoOptions::outer_learning_rate, "outer_learning_rate", hyperparams::numberAbove(0),
               "sparseloco: the outer step's learning rate on the average of the workers' decoded payloads.");
  return schema;
}

// Every worker's payloads, per worker and parameter, in three collectives (positions, codes,
// levels), and the bits this worker sent.
std::pair<std::vector<std::vector<TwoBitTopK>>, uint64_t> allgatherPayloads(comm::Communicator& comm,
                                                                            const std::vector<TwoBitTopK>& own) {
  std::vector<at::Tensor> positions, codes, levels;
  for (const auto& payload : own) {
    positions.push_back(payload.positions);
    codes.push_back(payload.codes);
    levels.push_back(payload.levels.flatten());
  }
  uint64_t bits = 0;
  const auto all_positions = allgatherParts(comm, positions, bits);
  const auto all_codes = allgatherParts(comm, codes, bits);
  const auto all_levels = allgatherParts(comm, levels, bits);
  std::vector<std::vector<TwoBitTopK>> gathered(all_positions.size());
  for (size_t w = 0; w < gathered.size(); ++w) {
    for (size_t i = 0; i < own.size(); ++i) {
      gathered[w].push_back({all_positions[w][i], all_codes[w][i], all_levels[w][i].view({-1, 2})});
    }
  }
  return {std::move(gathered), bits};
}

// SparseLoCo (Sarfi et al., arXiv 2508.15706): DiLoCo whose outer momentum is replaced by an
// error-feedback accumulator e per worker (the gradient buffers' memories). Every worker runs
// `every` steps of the trainer's optimizer alone from the global model θ_g; then e ← β e + (θ_g − θ),
// e is compressed by chunk-wise 2-bit top-k (two_bit_topk.h), what was sent, quantised, is taken
// out of e, every worker's payload is all-gathered (no reducer) and decoded, and θ_g moves by
// −outer_learning_rate times their average; every worker restarts from θ_g, which is evaluated.
// Checkpoint entries: sparseloco/global/<parameter>, sparseloco/error/<parameter>, sparseloco/syncs.
class SparseLoco : public GlobalModelSync {
 public:
  explicit SparseLoco(const SyncContext& context)
      : SparseLoco(context, sparseLocoSchema().read(context.config.sync.settings)) {}

  // What a sync leaves unsent is e, reported as what the sends lost.
  std::optional<SyncSample> sample() const override {
    return sampleOf(exchange_, errors_, /*lossless=*/false, /*error_feedback=*/true);
  }
  LayerSample layerSample() const override {
    std::vector<reducers::Reducer::TensorCost> costs;
    if (lastSync()) {
      for (const auto& layout : layouts_) costs.push_back({twoBitTopKBits(layout), 0});
    }
    return layerSampleOf(exchange_, errors_, /*lossless=*/false, std::move(costs));
  }

  void saveState(TensorMap& state) const override {
    for (size_t i = 0; i < names_.size(); ++i) {
      state["sparseloco/global/" + names_[i]] = global_[i];
      state["sparseloco/error/" + names_[i]] = errors_[i];
    }
    state[kSyncs] = torch::tensor(syncs_, torch::kInt64);
  }
  bool checksEntry(const std::string& /*name*/) const override { return false; }
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
  }

 private:
  static constexpr const char* kSyncs = "sparseloco/syncs";

  SparseLoco(const SyncContext& context, const SparseLocoOptions& options)
      : GlobalModelSync(context, GradientExchange::Options{false, context.clip_norm, true}, options.every,
                        options.drift),
        options_(options),
        names_(context.names),
        gradients_(context.buffers.gradients),
        errors_(context.buffers.memories) {
    for (const auto& p : params_) layouts_.push_back({p.numel(), options_.chunk, options_.density});
  }

  // Steps 1-6 of the header's algorithm; the average lands in the gradient buffers (free once the
  // optimizer stepped). Returns the bits sent.
  uint64_t outerStep(int64_t /*step*/) override {
    torch::NoGradGuard no_grad;
    std::vector<TwoBitTopK> own;
    for (size_t i = 0; i < params_.size(); ++i) {
      errors_[i].mul_(options_.error_decay).add_(global_[i] - params_[i].detach());
      if (!std::isfinite(errors_[i].sum().item<double>())) {
        throw NonFiniteGradient("the pseudo-gradient of '" + names_[i] + "' is not finite (nan or inf)");
      }
      own.push_back(encodeTwoBitTopK(errors_[i], layouts_[i]));
      errors_[i].sub_(decodeTwoBitTopK(own.back(), layouts_[i]).view_as(errors_[i]));
    }
    const auto [gathered, bits] = allgatherPayloads(comm_, own);
    for (size_t i = 0; i < params_.size(); ++i) {
      gradients_[i].zero_();
      for (const auto& payloads : gathered) {
        gradients_[i].add_(decodeTwoBitTopK(payloads[i], layouts_[i]).view_as(gradients_[i]));
      }
      gradients_[i].div_(comm_.size());
      global_[i].add_(gradients_[i], -options_.outer_learning_rate);
    }
    ++syncs_;
    copyInto(params_, global_);
    checkGlobalModel(global_, names_);
    return bits;
  }

  const SparseLocoOptions options_;
  const std::vector<std::string>& names_;
  const std::vector<at::Tensor>& gradients_;
  const std::vector<at::Tensor>& errors_;  // e, the error-feedback accumulator
  std::vector<TwoBitTopKLayout> layouts_;
  int64_t syncs_ = 0;
};

}  // namespace

SynchronizerSpec sparseLocoSpec() {
  // θ_g and the replicas' mean while the drift is measured (the accumulator is the memory buffer).
  return {[](const SyncContext& c) { return std::make_unique<SparseLoco>(c); },
          sparseLocoSchema().specs(),
          true,
          [](const ExperimentConfig& config) {
            StrategyRequirements requirements("sparseloco");
            requireNoReducer(requirements, config, "sparseloco", "2-bit top-k");
            requirements.check();
          },
          [](const ExperimentConfig&, const tasks::ModelSize& model) { return parameterCopies(2, model); },
          [](const ExperimentConfig& config) {
            return periodicSchedule("sparseloco", sparseLocoSchema().read(config.sync.settings).every);
          }};
}

}  // namespace gcrun::experiments
