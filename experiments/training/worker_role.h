#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "outputs/timer.h"
#include "reducers/comm/communicator.h"
#include "tasks/task.h"

namespace gcrun::experiments {

// Every rank says whether its input (`problem`: empty, or its own error) passed its checks, so that
// all stop together: a failing rank with its own error, the others with `others` followed by the
// lowest failing rank's error (comm::firstProblem), so that every rank's line says why.
void agreeOnInput(comm::Communicator& comm, const std::string& problem, const std::string& others);

// The device that a process's simulated workers take turns on (a BasicLockable): one holds it at
// a time, and it keeps how long the turns take, which is how long a collective may wait for the
// last of them to reach it.
class TurnLock {
 public:
  void lock();
  void unlock();
  // The longest turn so far in seconds, the one under way included; 0 before the first.
  double longestTurnS() const;

 private:
  std::mutex device_;
  mutable std::mutex times_;  // guards the two below, read by a failing worker during a turn
  std::optional<std::chrono::steady_clock::time_point> started_;
  std::chrono::steady_clock::duration longest_{};
};

// A worker's hold on the device for one piece of compute; empty when it has the device to itself.
using Turn = std::unique_lock<TurnLock>;

// How one worker shares its process: alone (PlainWorker) or as one of the process's simulated
// workers over one copy of the parameters (SimulatedWorker, experiments/worker/simulated_workers.h). The worker's
// run and its trainer ask the role wherever the two differ.
class WorkerRole {
 public:
  virtual ~WorkerRole() = default;

  // Held around this worker's compute (building its model, forward and backward, evaluation,
  // restoring a checkpoint); an empty lock when the worker has the device to itself.
  virtual Turn turn() = 0;
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
  Turn turn() override { return {}; }
  void settleInput(comm::Communicator& comm, const std::string& problem, tasks::Task* task) override;
  void update(int64_t step, const std::function<void()>& apply) override;
  bool logs() const override { return true; }
  double computePerBatchMs(const outputs::Timer& timer) const override;
};

}  // namespace gcrun::experiments
