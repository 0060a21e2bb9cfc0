#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "experiments/sync/gradient_exchange.h"
#include "experiments/sync/replicas.h"
#include "experiments/sync/synchronizer.h"

namespace gcrun::experiments {

// Throws NonFiniteGradient naming the first of θ_g's tensors (`global`, named `names`) that is nan
// or inf after an outer step: an outer learning rate or momentum that overflows it would put every
// worker at it, and every evaluation after would be nan.
void checkGlobalModel(const std::vector<at::Tensor>& global, const std::vector<std::string>& names);

// What diloco, streaming-diloco and sparseloco share: every worker steps alone along its own
// gradient from the global model θ_g; after the steps that sendsAfter() names (by default every
// `every`-th) the replicas' drift is measured (when `drift`) and outerStep() syncs, measured;
// afterSync() then runs at every step, unmeasured. θ_g is what an evaluation sees. Each strategy
// checks θ_g where its outer step moves it (checkGlobalModel): one that stopped being finite stops
// the run.
class GlobalModelSync : public Synchronizer {
 public:
  GlobalModelSync(const SyncContext& context, GradientExchange::Options exchange, int64_t every, bool drift);

  void beforeBackward(bool sample) override { exchange_.startStep(sample, /*exchange=*/false); }
  uint64_t afterBackward() override;
  uint64_t afterStep(int64_t step) override;
  void beforeEvaluation() override { evaluated_.swapIn(global_); }
  void afterEvaluation() override { evaluated_.restore(); }
  std::optional<SyncEvent> lastSync() const override { return last_sync_; }

 protected:
  // Whether the workers sync after step `step` (1-based).
  virtual bool sendsAfter(int64_t step) const { return step % every_ == 0; }
  // The sync after step `step`: θ_g updated from the workers' models, every worker's parameters
  // set to it (or, for a strategy whose results land later, sent). Returns the bits this worker sent.
  virtual uint64_t outerStep(int64_t step) = 0;
  // After every step's sync, if any, outside what it measures: where results held back land.
  virtual void afterSync(int64_t /*step*/) {}

  comm::Communicator& comm_;
  const std::vector<at::Tensor>& params_;
  GradientExchange exchange_;
  std::vector<at::Tensor> global_;  // θ_g

 private:
  const int64_t every_;
  const bool drift_;
  EvaluatedModel evaluated_;
  std::optional<SyncEvent> last_sync_;  // the last step's, if it synced
};

}  // namespace gcrun::experiments
