#pragma once

#include <optional>
#include <string>
#include <vector>

#include "outputs/performance/predict_options.h"
#include "outputs/performance/run_timeline.h"
#include "outputs/performance/step_model.h"
#include "outputs/report/run_data.h"

namespace gcrun::performance {

// Runs are compared when they train the same thing the same way (task, model, batch size),
// whatever their reducer: the key they share.
std::string comparisonOf(const outputs::RunData& run);
// The run directory's own name, the last part of `dir`.
std::string baseName(const std::string& dir);

// Each traced local step's forward+backward+optimizer (one worker's, the first) in milliseconds,
// sorted.
std::vector<double> computeMsOfSteps(const RunTimeline& timeline);
// Half the interquartile range over the median of sorted values; 0 for fewer than two.
double relativeSpread(const std::vector<double>& sorted);

// Each program's forward, backward and optimizer scaled to take `ms`, its codec kept: runs that
// share a compute profile replay it at every step of every worker, so that steps slowed by load
// during one run do not decide between methods.
RunTimeline computingAlike(const RunTimeline& timeline, double ms);
// A basis that replays one compute at every step (computingAlike), not a scale of the run's own.
bool sharesCompute(const ComputeBasis& compute);

// How a run's steps replay `compute`: under a shared profile, a copy of the timeline computing
// alike; otherwise the run's own steps at the scale that gives their median compute the basis's
// (none: as traced).
struct ComputeReplay {
  std::optional<RunTimeline> alike;
  ComputeScale scale;
  const RunTimeline& of(const RunTimeline& timeline) const { return alike ? *alike : timeline; }
};
ComputeReplay computeReplay(const RunTimeline& timeline, const ComputeBasis& compute);

// Each run's compute basis under `choice` (runs[i]'s at [i]): --compute-ms-per-batch, else the
// comparison's shared profile, else the run's own.
std::vector<ComputeBasis> computeBases(const std::vector<outputs::RunData>& runs,
                                       const std::vector<RunTimeline>& timelines, const ComputeChoice& choice);

// Runs ready to replay, each timeline with its compute basis's shared profile applied once (not in
// every prediction of its rows and their break-even searches, each of which would copy it again).
struct ReplayedRuns {
  std::vector<RunTimeline> timelines;  // with a shared compute profile applied
  std::vector<ComputeBasis> left;      // what their predictions still apply: --compute-ms-per-batch
  std::vector<ComputeBasis> bases;     // computeBases's, for the rows' compute_basis_ms
};
ReplayedRuns replayedRuns(const std::vector<RunTimeline>& timelines, std::vector<ComputeBasis> bases);

// One line per comparison whose runs should compute alike but were measured to differ beyond
// their steps' spread (a busy machine during one of them), naming the runs and their times.
std::vector<std::string> computeMismatches(const std::vector<outputs::RunData>& runs,
                                           const std::vector<RunTimeline>& timelines);

}  // namespace gcrun::performance
