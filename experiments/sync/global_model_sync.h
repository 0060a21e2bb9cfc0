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

// What diloco and sparseloco share: every worker steps alone along its own gradient from the global
// model θ_g; after every `every`-th step the replicas' drift is measured (when `drift`) and
// outerStep() moves θ_g and puts every worker back at it; θ_g is what an evaluation sees, and a
// θ_g that stopped being finite stops the run (checkGlobalModel).
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
  // The sync: θ_g updated from the workers' models, every worker's parameters set to it. Returns
  // the bits this worker sent.
  virtual uint64_t outerStep() = 0;

  comm::Communicator& comm_;
  const std::vector<at::Tensor>& params_;
  GradientExchange exchange_;
  std::vector<at::Tensor> global_;  // θ_g

 private:
  const std::vector<std::string>& global_names_;
  const int64_t every_;
  const bool drift_;
  EvaluatedModel evaluated_;
  std::optional<SyncEvent> last_sync_;  // the last step's, if it synced
};

}  // namespace gcrun::experiments
