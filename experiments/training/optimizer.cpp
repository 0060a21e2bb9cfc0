#include "experiments/training/optimizer.h"

#include <regex>

#include <ATen/ATen.h>

#include "experiments/training/lr_schedule.h"

namespace gcrun::experiments {

Optimizer::Group Optimizer::groupOf(const std::string& name, const OptimizerOptions& options) {
  static const std::regex batch_norm(R"(.*\.bn\d+\.(weight|bias))");
  const bool conv = name.find("conv") != std::string::npos && name.find("weight") != std::string::npos;
  if (conv) return {options.conv_lr(), options.conv_wd()};
  if (std::regex_match(name, batch_norm)) return {options.learning_rate, options.weight_decay_bn};
  return {options.learning_rate, options.other_wd()};
}

Optimizer::Optimizer(const OptimizerOptions& options, std::vector<at::Tensor> params,
                     const std::vector<std::string>& names, std::vector<at::Tensor> grads)
    : options_(options), params_(std::move(params)), grads_(std::move(grads)), momenta_(params_.size()) {
  for (const auto& name : names) groups_.push_back(groupOf(name, options_));
}

void Optimizer::addWeightDecay(size_t i) {
  if (groups_[i].weight_decay != 0) grads_[i].add_(params_[i].detach(), groups_[i].weight_decay);
}

void Optimizer::applyMomentum(size_t i) {
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

void Optimizer::step(int world_size, double epoch) {
  for (size_t i = 0; i < params_.size(); ++i) {
    params_[i].detach().add_(grads_[i], -learningRate(options_, groups_[i].base_lr, world_size, epoch));
  }
}

}  // namespace gcrun::experiments
