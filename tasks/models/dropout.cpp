#include "tasks/models/dropout.h"

#include <mutex>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>

namespace gcrun::tasks::models {

void Dropout::seed(uint64_t seed, c10::Device device) {
  if (device.is_cpu()) {
    generator_ = at::detail::createCPUGenerator(seed);
    return;
  }
  generator_ = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(generator_.mutex());
  generator_.set_current_seed(seed);
}

at::Tensor Dropout::state() const { return generator_.defined() ? generator_.get_state() : at::Tensor(); }

void Dropout::setState(const at::Tensor& state, c10::Device device) {
  if (!generator_.defined()) seed(0, device);
  std::lock_guard<std::mutex> lock(generator_.mutex());
  generator_.set_state(state);
}

at::Tensor Dropout::operator()(const at::Tensor& input, bool training) {
  if (!training || p_ == 0) return input;
  if (!generator_.defined()) seed(0, input.device());
  at::Tensor keep = at::empty_like(input).bernoulli_(1 - p_, generator_);
  return input * keep.div_(1 - p_);
}

}  // namespace gcrun::tasks::models
