#include "experiments/training/worker_role.h"

#include "hyperparams/base/errors.h"
#include "reducers/comm/agreement.h"

namespace gcrun::experiments {

void agreeOnInput(comm::Communicator& comm, const std::string& problem, const std::string& others) {
  const auto first = comm::firstProblem(comm, problem);
  if (!problem.empty()) throw UserError(problem);
  if (first) throw UserError(others + " (rank " + std::to_string(first->rank) + ": " + first->problem + ")");
}

void PlainWorker::settleInput(comm::Communicator& comm, const std::string& problem, tasks::Task* /*task*/) {
  agreeOnInput(comm, problem, "another rank's input failed its checks");
}

void PlainWorker::update(int64_t /*step*/, const std::function<void()>& apply) { apply(); }

// Its batch time is its own compute: run.json leaves the field out.
double PlainWorker::computePerBatchMs(const outputs::Timer& /*timer*/) const { return 0; }

}  // namespace gcrun::experiments
