#include "experiments/sync/global_slice.h"

#include <cmath>

#include <torch/torch.h>

#include "experiments/sync/global_model_sync.h"
#include "experiments/sync/gradient_exchange.h"

namespace gcrun::experiments {

GlobalSlice::GlobalSlice(std::vector<std::string> names, std::vector<at::Tensor> params, std::vector<at::Tensor> global,
                         std::vector<at::Tensor> gradients, std::vector<at::Tensor> memories,
                         reducers::Reducer& reducer, const OuterSgdOptions& outer)
    : names(std::move(names)),
      params(std::move(params)),
      global(std::move(global)),
      gradients(std::move(gradients)),
      memories(std::move(memories)),
      reducer(reducer),
      outer_sgd(outer, this->global, this->names) {}

uint64_t GlobalSlice::sendPseudoGradients(bool lossless, bool error_feedback) {
  torch::NoGradGuard no_grad;
  const uint64_t bits =
      reducer.reduce(preparePseudoGradients(lossless, error_feedback, gradients), gradients, memories);
  checkAveraged(gradients);
  return bits;
}

const std::vector<at::Tensor>& GlobalSlice::preparePseudoGradients(bool lossless, bool error_feedback,
                                                                   const std::vector<at::Tensor>& own) {
  torch::NoGradGuard no_grad;
  const auto& sends = lossless ? own : memories;
  for (size_t i = 0; i < params.size(); ++i) {
    if (lossless || !error_feedback) {
      sends[i].copy_(global[i]).sub_(params[i].detach());
    } else {
      sends[i].add_(global[i] - params[i].detach());
    }
  }
  return sends;
}

void GlobalSlice::checkAveraged(const std::vector<at::Tensor>& averaged) const {
  for (size_t i = 0; i < params.size(); ++i) {
    if (!std::isfinite(averaged[i].sum().item<double>())) {
      throw NonFiniteGradient("the averaged pseudo-gradient of '" + names[i] + "' is not finite (nan or inf)");
    }
  }
}

void GlobalSlice::outerStep(const std::vector<at::Tensor>& averaged) {
  torch::NoGradGuard no_grad;
  outer_sgd.step(averaged);
  checkGlobalModel(global, names);
}

}  // namespace gcrun::experiments
