#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

namespace torch::autograd {
struct Node;
}

namespace gcrun::experiments {

// Calls on_ready(i) each time backward has accumulated parameter i's gradient into its .grad: the
// trigger PyTorch DDP uses to start a bucket's all-reduce while backward goes on. The hooks live
// as long as this object.
class GradientReadyHooks {
 public:
  GradientReadyHooks(const std::vector<at::Tensor>& parameters, std::function<void(size_t)> on_ready);
  ~GradientReadyHooks();
  GradientReadyHooks(const GradientReadyHooks&) = delete;
  GradientReadyHooks& operator=(const GradientReadyHooks&) = delete;

 private:
  std::function<void(size_t)> on_ready_;
  // A parameter only holds its accumulator weakly: without these the hooks would vanish with the
  // first graph.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> keys_;
};

}  // namespace gcrun::experiments
