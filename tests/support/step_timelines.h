#pragma once

#include <cstdint>
#include <vector>

#include "outputs/performance/prediction.h"

namespace gcrun::testing {

// A traced step as the step model replays it: `compute_ms` of forward, backward and optimizer,
// `codec_ms` of the exchange's own compute, then a blocking all-reduce of `bytes`.
inline performance::StepProgram blockingStep(int64_t step, double compute_ms, double codec_ms, double bytes) {
  using performance::StepItem;
  performance::StepProgram p;
  p.step = step;
  p.items = {{StepItem::Kind::compute, StepItem::Part::compute, 1000 * compute_ms, 0},
             {StepItem::Kind::compute, StepItem::Part::codec, 1000 * codec_ms, 0},
             {StepItem::Kind::call, StepItem::Part::compute, 0, 0}};
  p.collectives = {{CollectiveKind::all_reduce, bytes}};
  return p;
}

// Two workers whose steps 1-3 are each blockingStep(compute_ms, codec_ms, bytes).
inline performance::RunTimeline blockingRun(double compute_ms, double codec_ms, double bytes) {
  performance::RunTimeline timeline;
  for (int w = 0; w < 2; ++w) {
    std::vector<performance::StepProgram> steps;
    for (int64_t step = 1; step <= 3; ++step) steps.push_back(blockingStep(step, compute_ms, codec_ms, bytes));
    timeline.workers.push_back(steps);
  }
  return timeline;
}

}  // namespace gcrun::testing
