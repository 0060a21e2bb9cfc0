#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hyperparams/base/tensor_map.h"
#include "hyperparams/settings.h"

namespace gcrun::experiments {

// The outer optimizer of the strategies that apply an averaged pseudo-gradient to a global model
// (diloco, streaming-diloco).
// The strategies' options hold the defaults (outerSgdOf).
struct OuterSgdOptions {
  double learning_rate;
  double momentum;
  bool nesterov;
};

// Declares keys sync.outer_learning_rate, outer_momentum and outer_nesterov, one meaning for every
// strategy that reads them, on the fields of those names of the strategy's Options.
template <class Options>
hyperparams::SettingsSchema<Options> withOuterSgd(const hyperparams::SettingsSchema<Options>& schema) {
  return schema
      .add(&Options::outer_learning_rate, "outer_learning_rate", hyperparams::numberAbove(0),
           "diloco, streaming-diloco: the outer SGD's learning rate on the averaged pseudo-gradient.")
      .add(&Options::outer_momentum, "outer_momentum", hyperparams::fraction(),
           "diloco, streaming-diloco: the outer SGD's momentum (0: none).")
      .add(&Options::outer_nesterov, "outer_nesterov", hyperparams::boolean(),
           "diloco, streaming-diloco: Nesterov momentum in the outer SGD, as PyTorch's SGD(nesterov=True).");
}

template <class Options>
OuterSgdOptions outerSgdOf(const Options& options) {
  return {options.outer_learning_rate, options.outer_momentum, options.outer_nesterov};
}

// One torch.optim.SGD(lr, momentum, nesterov) (dampening 0, no weight decay) over `params`, op for
// op as _single_tensor_sgd: at its first step the momentum buffer is the gradient, then
// v = μ v + g; p -= lr (g + μ v) with Nesterov, lr v without. The tensors are updated in place.
class OuterSgd {
 public:
  // `params` (aliased, not copied) and their names, for the checkpoint entries.
  OuterSgd(const OuterSgdOptions& options, std::vector<at::Tensor> params, std::vector<std::string> names);

  // One step of every parameter, params[i] along gradients[i].
  void step(const std::vector<at::Tensor>& gradients);

  // Entries <prefix>momentum/<name> per parameter and <prefix>outer_steps.
  void saveState(TensorMap& state, const std::string& prefix) const;
  void loadState(const TensorMap& state, const std::string& prefix);

 private:
  const OuterSgdOptions options_;
  std::vector<at::Tensor> params_, momenta_;
  const std::vector<std::string> names_;
  int64_t steps_ = 0;
};

}  // namespace gcrun::experiments
