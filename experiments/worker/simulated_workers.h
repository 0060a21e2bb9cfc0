#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <vector>

#include <ATen/core/Tensor.h>

#include "experiments/training/worker_role.h"

namespace torch::nn {
class Module;
}

namespace gcrun::experiments {

// The logical workers of one process (distributed.simulated_workers) run as threads, each a full
// worker with its own task (data shard, batch-norm statistics, dropout and hidden state), error
// feedback, reducer and rank in the group, but they share one copy of the parameters and take
// turns on the device. Logical worker 0 owns the parameters: it applies each step's update, and
// the others wait for that update before their next forward pass. Every worker computes from the
// same parameters as a real worker would, so a simulated run gives what a run of as many processes
// gives. Under a strategy whose workers' models differ between syncs (SynchronizerSpec::
// local_replicas) each logical worker keeps its own parameters and applies its own updates; they
// still compute in turns.
// What a simulated worker's wait throws when another one of its process failed.
class AnotherWorkerFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class SharedParameters {
 public:
  // Held around forward/backward and evaluation: one logical worker computes at a time.
  TurnLock& compute() { return compute_; }
  // Whether a worker failed (its peers' turns then end their runs rather than compute).
  bool failed();

  // Worker 0, once its model is built: the parameters everyone uses.
  void publish(torch::nn::Module& model);
  // The others: their model's parameters become the published ones (its own storage is freed).
  // Waits for publish().
  void adopt(torch::nn::Module& model);

  // Worker 0: the update of `step` is applied.
  void stepped(int64_t step);
  // The others: returns once the update of `step` is applied.
  void waitForStep(int64_t step);

  // A worker failed: wakes every waiter, which then throws rather than wait forever.
  void fail();

 private:
  void waitUntil(std::unique_lock<std::mutex>& lock, const std::function<bool()>& ready);

  TurnLock compute_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<at::Tensor> parameters_;
  bool published_ = false;
  bool failed_ = false;
  int64_t applied_step_ = 0;
};

// Logical worker `index` of its process: worker 0 publishes its parameters and applies every
// update; the others adopt them and wait for each update; with `own_parameters`, each keeps and
// updates its own. They compute in turns and log through worker 0's logger.
class SimulatedWorker : public WorkerRole {
 public:
  SimulatedWorker(SharedParameters& shared, int index, bool own_parameters)
      : shared_(shared), index_(index), own_parameters_(own_parameters) {}

  // Throws AnotherWorkerFailed once a worker of the process failed: the run ends without the
  // minutes of compute that the workers still waiting for their turn would spend.
  Turn turn() override;
  // A failure stops the process's other logical workers too (their waits throw).
  void settleInput(comm::Communicator& comm, const std::string& problem, tasks::Task* task) override;
  void update(int64_t step, const std::function<void()>& apply) override;
  bool logs() const override { return index_ == 0; }
  double computePerBatchMs(const outputs::Timer& timer) const override;

 private:
  SharedParameters& shared_;
  int index_;
  bool own_parameters_;
};

}  // namespace gcrun::experiments
