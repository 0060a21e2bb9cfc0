#pragma once

#include <optional>
#include <string>

#include "outputs/report/run_data.h"

namespace gcrun::outputs {

// A metric value to reach, "test.accuracy=0.9": reached when the metric is at least the value, or
// at most it for a loss or a perplexity (lower is better).
struct Target {
  std::string metric;
  double value = 0;
  bool lower_is_better = false;
};

// Whether a smaller value of `metric` is better: a loss or a perplexity.
bool lowerIsBetter(const std::string& metric);

// Throws UserError naming `what` (the flag) and the accepted form.
Target parseTarget(const std::string& text, const std::string& what);

// The run's first evaluation at or past the target, if it reached it; `run` must have been loaded
// with the target's metric (loadRun's `metric`).
std::optional<EpochPoint> reachedAt(const RunData& run, const Target& target);

}  // namespace gcrun::outputs
