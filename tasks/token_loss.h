#pragma once

#include <map>
#include <string>

#include <ATen/core/Tensor.h>

#include "tasks/task.h"

namespace gcrun::tasks {

// The token-weighted cross entropy of both language tasks (language-model, wikitext2): metric
// `cross_entropy` summed per token with the tokens as weight, and `perplexity` = exp of its mean.

// Where a batch's per-token cross entropies are added up. Each task keeps the way its recorded
// runs were computed: the reference LSTM's torch reduction `sum` in float, GPT's per-token values
// (float) summed in double.
enum class TokenSum { in_float, in_double };

// An evaluation's sums before its first batch: cross_entropy is named at 0, so that a rank whose
// share of the split is empty packs the same sums as the others (the trainer all-reduces every
// rank's sums in order: a rank one value short leaves the others waiting).
MetricSums evaluationTokenLoss();

// Adds an evaluation batch: its `logits` [.., V] against `targets` (int64, the same leading shape).
void addTokenLoss(MetricSums& metrics, const at::Tensor& logits, const at::Tensor& targets, TokenSum sum);

// Adds a training batch whose mean loss over its `targets` is `mean_loss`.
void addMeanTokenLoss(MetricSums& metrics, const at::Tensor& mean_loss, const at::Tensor& targets);

// `means` with perplexity = exp(cross_entropy) where cross_entropy is there.
std::map<std::string, double> withPerplexity(std::map<std::string, double> means);

}  // namespace gcrun::tasks
