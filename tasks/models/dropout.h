#pragma once

#include <cstdint>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace gcrun::tasks::models {

// Inverted dropout (as torch.nn.Dropout) whose masks come from a generator the model owns, so that
// worker threads never draw from torch's shared global generator.
class Dropout {
 public:
  explicit Dropout(double p) : p_(p) {}

  // A CPU generator for CPU models; on CUDA the device's default generator, reseeded (each worker
  // process owns its device there).
  void seed(uint64_t seed, c10::Device device);

  at::Tensor operator()(const at::Tensor& input, bool training);

  // The generator's state, for checkpoints: undefined before the first seed() or mask.
  at::Tensor state() const;
  // Continues the masks from a state() of the same device's generator.
  void setState(const at::Tensor& state, c10::Device device);

 private:
  double p_;
  at::Generator generator_;
};

}  // namespace gcrun::tasks::models
