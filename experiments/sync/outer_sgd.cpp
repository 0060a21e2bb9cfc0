#include "experiments/sync/outer_sgd.h"

#include <utility>

#include <torch/torch.h>

namespace gcrun::experiments {

OuterSgd::OuterSgd(const OuterSgdOptions& options, std::vector<at::Tensor> params, std::vector<std::string> names)
    : options_(options), params_(std::move(params)), names_(std::move(names)) {
  for (const auto& p : params_) momenta_.push_back(torch::zeros_like(p));
}

void OuterSgd::step(const std::vector<at::Tensor>& gradients) {
  torch::NoGradGuard no_grad;
  const double mu = options_.momentum;
  for (size_t i = 0; i < params_.size(); ++i) {
    at::Tensor step = gradients[i];
    if (mu != 0) {
      if (steps_ == 0) {
        momenta_[i].copy_(gradients[i]);
      } else {
        momenta_[i].mul_(mu).add_(gradients[i]);
      }
      step = options_.nesterov ? gradients[i].add(momenta_[i], mu) : momenta_[i];
    }
    params_[i].add_(step, -options_.learning_rate);
  }
  ++steps_;
}

void OuterSgd::saveState(TensorMap& state, const std::string& prefix) const {
  for (size_t i = 0; i < names_.size(); ++i) state[prefix + "momentum/" + names_[i]] = momenta_[i];
  state[prefix + "outer_steps"] = torch::tensor(steps_, torch::kInt64);
}

void OuterSgd::loadState(const TensorMap& state, const std::string& prefix) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < names_.size(); ++i) momenta_[i].copy_(state.at(prefix + "momentum/" + names_[i]));
  steps_ = checkpointCount(state, prefix + "outer_steps", 0, savedStep(state));  // at most one a step
}

}  // namespace gcrun::experiments
