#pragma once

#include <optional>
#include <string>
#include <vector>

#include "outputs/performance/prediction.h"
#include "outputs/performance/quality_rule.h"

namespace gcrun::performance {

// `gcrun predict --target-cu`: for each worker count and network, the cheapest configuration among
// the predicted rows (run x H) whose compute utilisation reaches the target and whose run passes
// the quality rule (CU weighs nothing if the model is worse). Cheapest is what gives
// up least for it: where runs reached the accuracy target, the shortest predicted time to it;
// otherwise the fewest steps between syncs (a run that exchanges every step counts as 1), then the most data sent per
// step (the least compression), then the shortest time per step.
struct Recommendation {
  int workers = 1;
  std::string network;
  std::optional<size_t> pick;  // into the rows; none reaches the target
  size_t highest_cu = 0;       // the row with the highest CU there, among those passing the rule if any do
  // The runs there that the quality rule left out, in the rows' order, each with why.
  std::vector<std::pair<std::string, std::string>> left_out = {};
};

// One per (workers, network) in the rows' order. `rows` not empty.
std::vector<Recommendation> recommend(const std::vector<PredictionRow>& rows, double target_cu,
                                      const QualityRule& quality);

// "1gbit/20us, 4 workers: run gpt-diloco-fp16 (diloco H=32, fp16) reaches CU 0.93 at 41.2 ms per
// step, 812 s to the target", or that none does and which comes closest; then the runs left out
// ("; left out by the quality rule: gpt-diloco-fp4 (validation.loss 3.1% higher)").
std::string recommendationLine(const Recommendation& recommendation, const std::vector<PredictionRow>& rows,
                               double target_cu);

// With `target_cu`, recommendationLine() for each worker count and network; else none.
std::vector<std::string> recommendationLines(const std::vector<PredictionRow>& rows,
                                             const std::optional<double>& target_cu, const QualityRule& quality);

}  // namespace gcrun::performance
