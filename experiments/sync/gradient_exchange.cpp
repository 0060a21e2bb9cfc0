#include "experiments/sync/gradient_exchange.h"

#include <algorithm>
#include <cmath>

#include <torch/torch.h>

#include "experiments/sync/gradient_hooks.h"
#include "experiments/sync/tensor_norms.h"

namespace gcrun::experiments {
namespace {

// Zeroed tensors shaped like `params`, as views of one flat buffer in reverse order; one tensor each
// (and `flat` undefined) for parameters of mixed types.
std::vector<at::Tensor> flatViews(const std::vector<at::Tensor>& params, at::Tensor& flat) {
  std::vector<at::Tensor> views;
  int64_t total = 0;
  for (const auto& p : params) {
    if (p.scalar_type() != params.front().scalar_type()) {
      flat = at::Tensor();
      for (const auto& q : params) views.push_back(torch::zeros(q.sizes(), q.options()));
      return views;
    }
    total += p.numel();
  }
  flat = torch::zeros({total}, params.empty() ? torch::TensorOptions() : params.front().options());
  views.resize(params.size());
  int64_t offset = 0;
  for (size_t k = params.size(); k-- > 0;) {
    views[k] = flat.narrow(0, offset, params[k].numel()).view(params[k].sizes());
    offset += params[k].numel();
  }
  return views;
}

double globalNormFromNorms(const std::vector<at::Tensor>& norms) { return at::stack(norms).norm().item<double>(); }

}  // namespace

GradientBuffers::GradientBuffers(const std::vector<at::Tensor>& params)
    : gradients(flatViews(params, gradient_flat)), memories(flatViews(params, memory_flat)) {}

GradientExchange::GradientExchange(std::vector<at::Tensor> params, std::vector<std::string> names,
                                   GradientBuffers& buffers, reducers::Reducer& reducer, Options options,
                                   std::function<void(size_t)> before_send)
    : params_(std::move(params)),
      names_(std::move(names)),
      reducer_(reducer),
      options_(options),
      before_send_(std::move(before_send)),
      grad_flat_(buffers.gradient_flat),
      grads_(buffers.gradients),
      memories_(buffers.memories) {
  for (size_t i = 0; i < params_.size(); ++i) params_[i].mutable_grad() = grads_[i];
  prepared_.assign(params_.size(), 0);
  send_sums_.resize(params_.size());
  grad_norms_.resize(params_.size());
  send_norms_.resize(params_.size());
  if (options_.clip_norm <= 0) {
    hooks_ = std::make_unique<GradientReadyHooks>(params_, [this](size_t i) { prepareSend(i); });
  }
}

GradientExchange::~GradientExchange() = default;

void GradientExchange::startStep(bool sample, bool exchange) {
  sampling_ = sample;
  exchanging_ = exchange;
  sampled_.reset();
  if (grad_flat_.defined()) {
    grad_flat_.zero_();
  } else {
    for (auto& g : grads_) g.zero_();
  }
}

void GradientExchange::prepareSend(size_t i) {
  torch::NoGradGuard no_grad;
  prepared_[i] = 1;
  // Autograd accumulates into the existing .grad in place; should a LibTorch version replace the
  // tensor instead, its values are copied back into the flat buffer.
  if (!params_[i].grad().is_same(grads_[i])) {
    grads_[i].copy_(params_[i].grad());
    params_[i].mutable_grad() = grads_[i];
  }
  before_send_(i);
  if (sampling_) grad_norms_[i] = grads_[i].norm();
  if (!exchanging_) {
    if (sampling_) send_norms_[i] = torch::zeros({}, grad_norms_[i].options());
    send_sums_[i] = grads_[i].sum();
    return;
  }
  if (options_.lossless) {
    if (sampling_) send_norms_[i] = grad_norms_[i];
  } else {
    if (options_.error_feedback) {
      memories_[i].add_(grads_[i]);
    } else {
      memories_[i].copy_(grads_[i]);
    }
    if (sampling_) send_norms_[i] = memories_[i].norm();
  }
  // A lossless reducer carries a nan or inf into the average, which reduce() checks anyway.
  if (!options_.lossless) send_sums_[i] = memories_[i].sum();
  reducer_.ready(i, sends());
}

// torch.nn.utils.clip_grad_norm_ on this worker's gradient, before error feedback and the reduce.
void GradientExchange::clip() {
  if (options_.clip_norm <= 0) return;
  std::vector<at::Tensor> norms;
  if (grad_flat_.defined()) {
    norms.push_back(grad_flat_.norm());
  } else {
    for (const auto& g : grads_) norms.push_back(g.norm());
  }
  const double coefficient = options_.clip_norm / (globalNormFromNorms(norms) + 1e-6);
  if (coefficient >= 1) return;
  if (grad_flat_.defined()) {
    grad_flat_.mul_(coefficient);
  } else {
    for (auto& g : grads_) g.mul_(coefficient);
  }
}

GradientExchange::LayerNorms GradientExchange::sampledLayerNorms() const {
  if (!sampled_) return {};
  return {doublesOf(grad_norms_), doublesOf(send_norms_)};
}

void GradientExchange::keepLocal() {
  torch::NoGradGuard no_grad;
  clip();
  for (size_t k = params_.size(); k-- > 0;) {
    if (!prepared_[k]) prepareSend(k);
  }
  std::fill(prepared_.begin(), prepared_.end(), 0);
  if (const int64_t bad = firstNonFinite(send_sums_); bad >= 0) {
    throw NonFiniteGradient("the local gradient of '" + names_[bad] + "' is not finite (nan or inf)");
  }
  if (sampling_) sampled_ = Norms{globalNormFromNorms(grad_norms_), 0.0};
}

uint64_t GradientExchange::reduce() {
  torch::NoGradGuard no_grad;
  clip();
  for (size_t k = params_.size(); k-- > 0;) {
    if (!prepared_[k]) prepareSend(k);
  }
  std::fill(prepared_.begin(), prepared_.end(), 0);
  if (const int64_t bad = options_.lossless ? -1 : firstNonFinite(send_sums_); bad >= 0) {
    throw NonFiniteGradient("the local gradient of '" + names_[bad] + "' is not finite (nan or inf)");
  }
  if (sampling_) sampled_ = Norms{globalNormFromNorms(grad_norms_), globalNormFromNorms(send_norms_)};
  const uint64_t bits = reducer_.reduce(sends(), grads_, memories_);
  if (grad_flat_.defined() && std::isfinite(grad_flat_.sum().item<double>())) return bits;
  std::vector<at::Tensor> sums;
  for (const auto& g : grads_) sums.push_back(g.sum());
  if (const int64_t bad = firstNonFinite(sums); bad >= 0) {
    throw NonFiniteGradient("the reduced gradient of '" + names_[bad] + "' is not finite (nan or inf)");
  }
  return bits;
}

}  // namespace gcrun::experiments
