#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "outputs/timer.h"
#include "reducers/comm/communicator.h"
#include "tasks/task.h"

namespace gcrun::experiments {

// Every rank says whether its input (`problem`: empty, or its own error) passed its checks, so that
// all stop together: a failing rank with its own error, the others with `others` followed by the
// lowest failing rank's error (comm::firstProblem), so that every rank's line says why.
void agreeOnInput(comm::Communicator& comm, const std::string& problem, const std::string& others);

// How one worker shares its process: alone (PlainWorker) or as one of the process's simulated
// workers over one copy of the parameters (SimulatedWorker, experiments/worker/simulated_workers.h). The worker's
// run and its trainer ask the role wherever the two differ.
class WorkerRole {
 public:
  virtual ~WorkerRole() = default;

  // Held around this worker's compute (building its model, forward and backward, evaluation,
  // restoring a checkpoint); an empty lock when the worker has the device to itself.
  virtual std::unique_lock<std::mutex> turn() = 0;
  // Once the task and the reducer are built (`task`) or failed (`problem`, `task` null): every rank
  // stops together on a failure, else the model gets the parameters it computes with.
  virtual void settleInput(comm::Communicator& comm, const std::string& problem, tasks::Task* task) = 0;
  // Step `step`'s update: `apply` it, or wait for the worker that applies it to shared parameters.
  virtual void update(int64_t step, const std::function<void()>& apply) = 0;
  // Whether this worker writes the process's log (spdlog's default logger).
  virtual bool logs() const = 0;
  // run.json's compute_per_batch_ms: a simulated worker's own compute, which its batch time hides.
  virtual double computePerBatchMs(const outputs::Timer& timer) const = 0;
};

// A worker with its process to itself.
class PlainWorker : public WorkerRole {
 public:
  std::unique_lock<std::mutex> turn() override { return {}; }
  void settleInput(comm::Communicator& comm, const std::string& problem, tasks::Task* task) override;
  void update(int64_t step, const std::function<void()>& apply) override;
  bool logs() const override { return true; }
  double computePerBatchMs(const outputs::Timer& timer) const override;
};

}  // namespace gcrun::experiments
