#pragma once

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hyperparams/config.h"

namespace gcrun::experiments {

// The reference's SGD (powersgd.md 1.3.7) over one worker's parameters and their gradient
// buffers: weight decay by the reference's parameter groups, momentum in its three forms, and the
// learning-rate step. The trainer decides when each part runs (before or after the reduce).
class Optimizer {
 public:
  // grads[i] is params[i]'s gradient buffer, updated in place by weight decay and momentum.
  Optimizer(const OptimizerOptions& options, std::vector<at::Tensor> params, const std::vector<std::string>& names,
            std::vector<at::Tensor> grads);

  // g += wd * p, with the decay of the parameter's group.
  void addWeightDecay(size_t i);
  // m = g on the first step; then m = mu m + g (nesterov, heavy-ball) or mu m + (1 - mu) g (EMA).
  // g becomes g + m for nesterov (the reference's form, not PyTorch's g + mu m) and m otherwise.
  // The reference's heavy-ball branch raises after computing m; gcrun applies m, its intent.
  void applyMomentum(size_t i);
  // p -= lr g with each group's rate at the fractional `epoch` (lr_schedule.h).
  void step(int world_size, double epoch);

  size_t size() const { return params_.size(); }
  // Undefined until the parameter's first momentum step; checkpoints save and restore them.
  std::vector<at::Tensor>& momenta() { return momenta_; }

 private:
  // The reference's weight-decay groups, chosen by parameter name, quirks included: a top-level
  // `bn1.*` does not match the batch-norm pattern and so gets decayed.
  struct Group {
    double base_lr;
    double weight_decay;
  };
  static Group groupOf(const std::string& name, const OptimizerOptions& options);

  OptimizerOptions options_;
  std::vector<at::Tensor> params_, grads_, momenta_;
  std::vector<Group> groups_;
};

}  // namespace gcrun::experiments
