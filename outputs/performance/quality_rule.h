#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "outputs/performance/predict_options.h"
#include "outputs/performance/prediction.h"
#include "outputs/report/target.h"

namespace gcrun::performance {

// "Does it pay" compares methods at equal quality: a method that trains a worse model is never
// named fastest, whatever its time per step. The rule is one of:
// - tolerance (the default): within each comparison, a configuration's final main metric, its
//   mean over seeds, must be within the tolerance of the best configuration's: `share` points
//   where higher is better, `share` of the best value where lower is better (a loss, a
//   perplexity), or the best configuration's standard deviation over its seeds if that is larger;
// - target (--target): the methods are compared by their predicted time to reach it (known at a
//   run's own H only), and a run that did not reach it is outside;
// - not weighed: --quality-tolerance off, or no run carries its metric's final value.
// The exact baseline is the reference speeds are given against: the tolerance rule never leaves it
// out (the target rule does when it did not reach the target: there is no time to compare with).
struct QualityRule {
  enum class Kind { tolerance, target, not_weighed };
  Kind kind = Kind::not_weighed;
  std::string sentence;                               // the rule used, one sentence for every output
  std::map<std::string, std::string> outside_by_dir;  // why a run is outside ("4.9 points lower")
  std::optional<outputs::Target> target;              // the target rule's

  // Why `row`'s run may not be named fastest, or nothing when it may.
  std::optional<std::string> whyOutside(const PredictionRow& row) const;
};

// The rule over `rows` (predictRows's: each carries its run's configuration and final metric).
QualityRule qualityRule(const std::vector<PredictionRow>& rows, const QualityTolerance& tolerance,
                        const std::optional<outputs::Target>& target);
inline QualityRule qualityRule(const std::vector<PredictionRow>& rows, const PredictOptions& options) {
  return qualityRule(rows, options.quality, options.target);
}

}  // namespace gcrun::performance
