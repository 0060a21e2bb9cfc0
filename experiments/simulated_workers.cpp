#include "experiments/simulated_workers.h"

#include <stdexcept>

#include <torch/nn/module.h>
#include <torch/torch.h>

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

void SharedParameters::waitUntil(std::unique_lock<std::mutex>& lock, const std::function<bool()>& ready) {
  changed_.wait(lock, [&] { return failed_ || ready(); });
  if (!ready()) throw AnotherWorkerFailed("another simulated worker of this process failed");
}

}  // namespace gcrun::experiments
