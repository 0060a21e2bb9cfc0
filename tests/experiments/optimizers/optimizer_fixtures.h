#pragma once

#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "experiments/optimizers/optimizer.h"

namespace gcrun::experiments::testing {

// Parameters, their names and gradient buffers, owned here for an optimizer made over them.
struct Model {
  std::vector<at::Tensor> params, grads;
  std::vector<std::string> names;

  void add(const std::string& name, at::Tensor value) {
    names.push_back(name);
    grads.push_back(at::zeros_like(value));
    params.push_back(std::move(value));
  }

  // A copy whose tensors share nothing with these.
  Model clone() const {
    Model copy;
    for (size_t i = 0; i < params.size(); ++i) copy.add(names[i], params[i].clone());
    return copy;
  }
};

inline std::unique_ptr<Optimizer> makeOptimizer(const OptimizerOptions& options, Model& model,
                                                std::vector<std::string> embeddings = {}, int64_t total_steps = 100) {
  return checkedOptimizer(options).make(
      OptimizerContext{options, model.params, model.names, model.grads, std::move(embeddings), 1, total_steps});
}

// Runs every part at once, untimed.
inline void untimed(StepPart, const std::function<void()>& work) { work(); }

// One step at 0-based `step`, with `grads` copied into the gradient buffers first.
inline void stepWith(Optimizer& optimizer, Model& model, const std::vector<at::Tensor>& grads, int64_t step) {
  for (size_t i = 0; i < grads.size(); ++i) model.grads[i].copy_(grads[i]);
  optimizer.step(StepPosition{step, 0.0}, untimed);
}

}  // namespace gcrun::experiments::testing
