#include "experiments/sync/gradient_hooks.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace gcrun::experiments {
namespace {

class ReadyHook : public torch::autograd::FunctionPostHook {
 public:
  ReadyHook(const std::function<void(size_t)>& on_ready, size_t index) : on_ready_(on_ready), index_(index) {}

  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    on_ready_(index_);
    return outputs;
  }

 private:
  const std::function<void(size_t)>& on_ready_;
  size_t index_;
};

}  // namespace

GradientReadyHooks::GradientReadyHooks(const std::vector<at::Tensor>& parameters, std::function<void(size_t)> on_ready)
    : on_ready_(std::move(on_ready)) {
  for (size_t i = 0; i < parameters.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(parameters[i]);
    keys_.push_back(accumulator->add_post_hook(std::make_unique<ReadyHook>(on_ready_, i)));
    accumulators_.push_back(std::move(accumulator));
  }
}

GradientReadyHooks::~GradientReadyHooks() {
  for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(keys_[i]);
}

}  // namespace gcrun::experiments
