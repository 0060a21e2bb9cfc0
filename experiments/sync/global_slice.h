#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "experiments/sync/outer_sgd.h"
#include "reducers/reducer.h"

namespace gcrun::experiments {

// A part of the model that follows the global model θ_g as diloco's does: the whole model for
// diloco, each fragment for streaming-diloco. It holds its parameters, their part of θ_g, gradient
// buffers and error-feedback memories (the same tensors, aliased, not copied), the reducer its
// pseudo-gradients go through and the outer SGD that moves its part of θ_g.
struct GlobalSlice {
  GlobalSlice(std::vector<std::string> names, std::vector<at::Tensor> params, std::vector<at::Tensor> global,
              std::vector<at::Tensor> gradients, std::vector<at::Tensor> memories, reducers::Reducer& reducer,
              const OuterSgdOptions& outer);

  // The pseudo-gradients Δ = θ_g − θ through the reducer, their average left in the gradient
  // buffers (free once the optimizer stepped). What the reducer sends is the memory, as every-step
  // hands it: Δ added to it when `error_feedback` (what a send lost goes again next time), Δ
  // alone without; a `lossless` reducer averages the gradient buffers in place. Returns the bits
  // sent; throws NonFiniteGradient naming the first parameter whose average is not finite.
  uint64_t sendPseudoGradients(bool lossless, bool error_feedback);

  // sendPseudoGradients() in parts, for a send that runs elsewhere, into buffers of the caller's
  // own (`own`, shaped as the gradients). preparePseudoGradients() puts Δ where the reducer sends
  // it from and returns that list: `own` when `lossless` (averaged there in place), the memories
  // otherwise; the reducer then writes the average into `own`. checkAveraged() throws
  // NonFiniteGradient naming the first parameter whose average is not finite.
  const std::vector<at::Tensor>& preparePseudoGradients(bool lossless, bool error_feedback,
                                                        const std::vector<at::Tensor>& own);
  void checkAveraged(const std::vector<at::Tensor>& averaged) const;

  // The outer SGD's step on this part of θ_g along `averaged`; a θ_g that stopped being finite
  // stops the run (checkGlobalModel).
  void outerStep(const std::vector<at::Tensor>& averaged);

  const std::vector<std::string> names;
  const std::vector<at::Tensor> params, global, gradients, memories;
  reducers::Reducer& reducer;
  OuterSgd outer_sgd;
};

}  // namespace gcrun::experiments
