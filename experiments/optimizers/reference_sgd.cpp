#include <regex>

#include <ATen/ATen.h>

#include "experiments/optimizers/gradient_clipping.h"
#include "experiments/optimizers/optimizer.h"

namespace gcrun::experiments {
namespace {

const std::string kMomentumPrefix = "momentum/";

// The reference's SGD (powersgd.md 1.3.7): weight decay by the reference's parameter groups,
// momentum in its three forms, and the learning-rate step; weight decay and momentum come before
// the reduce or after it, as optimizer.wd_before_reduce and mom_before_reduce say. Checkpoint
// entries: momentum/<parameter>, once the parameter had its first momentum step.
class ReferenceSgd final : public Optimizer {
 public:
  explicit ReferenceSgd(const OptimizerContext& context)
      : options_(context.options),
        params_(context.params),
        names_(context.names),
        grads_(context.grads),
        momenta_(params_.size()),
        schedule_(makeSchedule(context)) {
    for (const auto& name : names_) groups_.push_back(groupOf(name, options_));
  }

  void beforeSend(size_t i) override {
    if (options_.wd_before_reduce) addWeightDecay(i);
    if (options_.mom_before_reduce) applyMomentum(i);
  }

  // The clip, when on, is of the reduced gradient, before weight decay and momentum.
  void step(const StepPosition& at, const TimedPart& timed) override {
    if (options_.clip_norm > 0) clipGradientNorm(grads_, options_.clip_norm);
    if (!options_.wd_before_reduce) {
      timed(StepPart::weight_decay, [&] {
        for (size_t i = 0; i < params_.size(); ++i) addWeightDecay(i);
      });
    }
    if (!options_.mom_before_reduce) {
      timed(StepPart::momentum, [&] {
        for (size_t i = 0; i < params_.size(); ++i) applyMomentum(i);
      });
    }
    timed(StepPart::update, [&] {
      for (size_t i = 0; i < params_.size(); ++i) {
        params_[i].detach().add_(grads_[i], -schedule_->rate(groups_[i].base_lr, at));
      }
    });
  }

  double learningRate(const StepPosition& at) const override { return schedule_->rate(options_.learning_rate, at); }

  void saveState(TensorMap& state) const override {
    for (size_t i = 0; i < names_.size(); ++i) {
      if (momenta_[i].defined()) state[kMomentumPrefix + names_[i]] = momenta_[i];
    }
  }

  void expectState(TensorMap& expected) const override {
    for (size_t i = 0; i < names_.size(); ++i) {
      expected[kMomentumPrefix + names_[i]] = at::empty(params_[i].sizes(), params_[i].options());
    }
  }

  bool mayLack(const std::string& name) const override { return name.rfind(kMomentumPrefix, 0) == 0; }

  void loadState(const TensorMap& state) override {
    for (size_t i = 0; i < names_.size(); ++i) {
      const auto momentum = state.find(kMomentumPrefix + names_[i]);
      if (momentum == state.end()) continue;
      momenta_[i] = at::empty(params_[i].sizes(), params_[i].options()).copy_(momentum->second);
    }
  }

 private:
  // The reference's weight-decay groups, chosen by parameter name, quirks included: a top-level
  // `bn1.*` does not match the batch-norm pattern and so gets decayed.
  struct Group {
    double base_lr;
    double weight_decay;
  };

  static Group groupOf(const std::string& name, const OptimizerOptions& options) {
    static const std::regex batch_norm(R"(.*\.bn\d+\.(weight|bias))");
    const bool conv = name.find("conv") != std::string::npos && name.find("weight") != std::string::npos;
    if (conv) return {options.conv_lr(), options.conv_wd()};
    if (std::regex_match(name, batch_norm)) return {options.learning_rate, options.weight_decay_bn};
    return {options.learning_rate, options.other_wd()};
  }

  // g += wd * p, with the decay of the parameter's group.
  void addWeightDecay(size_t i) {
    if (groups_[i].weight_decay != 0) grads_[i].add_(params_[i].detach(), groups_[i].weight_decay);
  }

  // m = g on the first step; then m = mu m + g (nesterov, heavy-ball) or mu m + (1 - mu) g (EMA).
  // g becomes g + m for nesterov (the reference's form, not PyTorch's g + mu m) and m otherwise.
  // The reference's heavy-ball branch raises after computing m; gcrun applies m, its intent.
  void applyMomentum(size_t i) {
    auto& momentum = momenta_[i];
    if (!momentum.defined()) {
      momentum = grads_[i].clone();
    } else if (options_.momentum_type == MomentumType::exponential_moving_average) {
      momentum.mul_(options_.momentum).add_(grads_[i], 1.0 - options_.momentum);
    } else {
      momentum.mul_(options_.momentum).add_(grads_[i]);
    }
    if (options_.momentum_type == MomentumType::nesterov) {
      grads_[i].add_(momentum);
    } else {
      grads_[i].copy_(momentum);
    }
  }

  OptimizerOptions options_;
  std::vector<at::Tensor> params_;
  std::vector<std::string> names_;
  std::vector<at::Tensor> grads_;
  std::vector<at::Tensor> momenta_;
  std::vector<Group> groups_;
  std::unique_ptr<LearningRateSchedule> schedule_;
};

}  // namespace

std::unique_ptr<Optimizer> makeReferenceSgd(const OptimizerContext& context) {
  return std::make_unique<ReferenceSgd>(context);
}

}  // namespace gcrun::experiments
