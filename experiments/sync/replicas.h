#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "experiments/sync/synchronizer.h"
#include "reducers/comm/communicator.h"

namespace gcrun::experiments {

// Helpers of the strategies whose workers' models differ between syncs.

// PyTorch 1.13's model_averaging.utils.average_parameters, op for op: the parameters flattened
// into one buffer, divided by the number of workers, all-reduced (sum) and copied back. Returns
// the bits this worker sent (the buffer's).
uint64_t averageParameters(comm::Communicator& comm, const std::vector<at::Tensor>& params);

// How far the workers' models have drifted apart: sqrt(mean_w ||θ_w - θ̄||²) / ||θ̄||, θ̄ their exact
// mean. A measurement, not part of training: it all-reduces a copy of the parameters and one
// scalar, and what it sends is not counted as sent.
double replicaDrift(comm::Communicator& comm, const std::vector<at::Tensor>& params);

// A sync of the workers' models as lastSync() reports it: the replicas' drift measured first when
// `measure_drift`, then `sync` run, its bits.
SyncEvent measuredSync(comm::Communicator& comm, const std::vector<at::Tensor>& params, bool measure_drift,
                       const std::function<uint64_t()>& sync);

// Detached copies of `tensors`.
std::vector<at::Tensor> copiesOf(const std::vector<at::Tensor>& tensors);
// to[i] = from[i], in place.
void copyInto(const std::vector<at::Tensor>& to, const std::vector<at::Tensor>& from);

// The worker's own parameters put aside while another model (the global one, the replicas'
// average) is evaluated in their place, and put back after.
class EvaluatedModel {
 public:
  explicit EvaluatedModel(const std::vector<at::Tensor>& params) : params_(params) {}
  // The parameters become `model` until restore().
  void swapIn(const std::vector<at::Tensor>& model);
  // The worker's own parameters again; nothing when none were swapped out.
  void restore();

 private:
  const std::vector<at::Tensor>& params_;
  std::vector<at::Tensor> kept_;
};

}  // namespace gcrun::experiments
