#include "experiments/training/worker_role.h"

#include <torch/torch.h>

#include "hyperparams/base/errors.h"

namespace gcrun::experiments {

void agreeOnInput(comm::Communicator& comm, const std::string& problem, const std::string& others) {
  auto failed = torch::full({1}, problem.empty() ? 0.0f : 1.0f, torch::TensorOptions().device(comm.device()));
  comm.allreduceSum(failed);
  if (!problem.empty()) throw UserError(problem);
  if (failed.item<float>() > 0) throw UserError(others);
}

void PlainWorker::settleInput(comm::Communicator& comm, const std::string& problem, tasks::Task* /*task*/) {
  agreeOnInput(comm, problem, "another rank's input failed its checks (its message says why)");
}

void PlainWorker::update(int64_t /*step*/, const std::function<void()>& apply) { apply(); }

// Its batch time is its own compute: run.json leaves the field out.
double PlainWorker::computePerBatchMs(const outputs::Timer& /*timer*/) const { return 0; }

}  // namespace gcrun::experiments
