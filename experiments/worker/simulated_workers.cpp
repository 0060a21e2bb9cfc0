#include "experiments/worker/simulated_workers.h"

#include <stdexcept>

#include <torch/nn/module.h>
#include <torch/torch.h>

#include "experiments/worker/run_info.h"
#include "hyperparams/base/errors.h"

namespace gcrun::experiments {

void SharedParameters::publish(torch::nn::Module& model) {
  std::lock_guard<std::mutex> lock(mutex_);
  parameters_ = model.parameters();
  published_ = true;
  changed_.notify_all();
}

void SharedParameters::adopt(torch::nn::Module& model) {
  std::unique_lock<std::mutex> lock(mutex_);
  waitUntil(lock, [this] { return published_; });
  const auto own = model.parameters();
  if (own.size() != parameters_.size()) throw std::logic_error("simulated workers: models of different parameters");
  torch::NoGradGuard no_grad;
  // Each worker keeps its own leaf tensors (its own .grad and autograd hooks) over shared storage.
  for (size_t i = 0; i < own.size(); ++i) own[i].set_data(parameters_[i]);
}

void SharedParameters::stepped(int64_t step) {
  std::lock_guard<std::mutex> lock(mutex_);
  applied_step_ = step;
  changed_.notify_all();
}

void SharedParameters::waitForStep(int64_t step) {
  std::unique_lock<std::mutex> lock(mutex_);
  waitUntil(lock, [&] { return applied_step_ >= step; });
}

void SharedParameters::fail() {
  std::lock_guard<std::mutex> lock(mutex_);
  failed_ = true;
  changed_.notify_all();
}

bool SharedParameters::failed() {
  std::lock_guard<std::mutex> lock(mutex_);
  return failed_;
}

void SharedParameters::waitUntil(std::unique_lock<std::mutex>& lock, const std::function<bool()>& ready) {
  changed_.wait(lock, [&] { return failed_ || ready(); });
  if (!ready()) throw AnotherWorkerFailed("another simulated worker of this process failed");
}

Turn SimulatedWorker::turn() {
  Turn turn(shared_.compute());
  if (shared_.failed()) throw AnotherWorkerFailed("another simulated worker of this process failed");
  return turn;
}

// The logical workers of a process see the same input, so none waits for the others' verdict.
void SimulatedWorker::settleInput(comm::Communicator& /*comm*/, const std::string& problem, tasks::Task* task) {
  if (!problem.empty()) {
    shared_.fail();
    throw UserError(problem);
  }
  if (own_parameters_) return;
  index_ == 0 ? shared_.publish(task->model()) : shared_.adopt(task->model());
}

void SimulatedWorker::update(int64_t step, const std::function<void()>& apply) {
  if (own_parameters_) return apply();
  if (index_ != 0) return shared_.waitForStep(step);
  apply();
  shared_.stepped(step);
}

double SimulatedWorker::computePerBatchMs(const outputs::Timer& timer) const {
  return experiments::computePerBatchMs(timer);
}

}  // namespace gcrun::experiments
