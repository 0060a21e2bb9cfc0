#include "tasks/token_loss.h"

#include <cmath>

#include <torch/nn/functional/loss.h>

namespace gcrun::tasks {
namespace {

constexpr const char* kCrossEntropy = "cross_entropy";

}  // namespace

MetricSums evaluationTokenLoss() {
  MetricSums metrics;
  metrics.add(kCrossEntropy, 0);
  return metrics;
}

void addTokenLoss(MetricSums& metrics, const at::Tensor& logits, const at::Tensor& targets, TokenSum sum) {
  namespace F = torch::nn::functional;
  const auto reduction = sum == TokenSum::in_float ? F::CrossEntropyFuncOptions().reduction(torch::kSum)
                                                   : F::CrossEntropyFuncOptions().reduction(torch::kNone);
  at::Tensor losses = F::cross_entropy(logits.flatten(0, -2), targets.flatten(), reduction);
  if (sum == TokenSum::in_double) losses = losses.to(at::kDouble).sum();
  metrics.add(kCrossEntropy, losses.item<double>());
  metrics.weight += static_cast<double>(targets.numel());
}

void addMeanTokenLoss(MetricSums& metrics, const at::Tensor& mean_loss, const at::Tensor& targets) {
  const double tokens = static_cast<double>(targets.numel());
  metrics.add(kCrossEntropy, mean_loss.item<double>() * tokens);
  metrics.weight += tokens;
}

std::map<std::string, double> withPerplexity(std::map<std::string, double> means) {
  if (const auto it = means.find(kCrossEntropy); it != means.end()) means["perplexity"] = std::exp(it->second);
  return means;
}

}  // namespace gcrun::tasks
