#include "experiments/training/worker_role.h"

#include <algorithm>

#include "hyperparams/base/errors.h"
#include "reducers/comm/agreement.h"

namespace gcrun::experiments {

void TurnLock::lock() {
  device_.lock();
  std::lock_guard<std::mutex> guard(times_);
  started_ = std::chrono::steady_clock::now();
}

void TurnLock::unlock() {
  {
    std::lock_guard<std::mutex> guard(times_);
    longest_ = std::max(longest_, std::chrono::steady_clock::now() - *started_);
    started_.reset();
  }
  device_.unlock();
}

double TurnLock::longestTurnS() const {
  std::lock_guard<std::mutex> guard(times_);
  auto longest = longest_;
  if (started_) longest = std::max(longest, std::chrono::steady_clock::now() - *started_);
  return std::chrono::duration<double>(longest).count();
}

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
