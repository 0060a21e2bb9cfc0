#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "outputs/network/network_profile.h"
#include "outputs/performance/predict_options.h"
#include "outputs/performance/run_timeline.h"
#include "outputs/performance/step_model.h"

namespace gcrun::performance {

// Each of `steps` replayed at `workers` on `network` (predictStep), in their order: the one door
// from a run's traced steps into the step model.
std::vector<StepPrediction> replaySteps(const StepsOfAll& steps, int workers, const network::NetworkProfile& network,
                                        const ComputeScale& scale);

// A run's time per step and the spread of the steps it came from.
struct Predicted {
  StepPrediction step;
  double noise = 0;
};

// A periodic run's local step. Between syncs each worker goes at its own pace and all meet at the
// sync, so the period is set by the slowest worker's mean local step; each step's slowest worker
// would add up every worker's noise instead.
Predicted slowestMeanLocalStep(const StepsOfAll& local, int workers, const network::NetworkProfile& network,
                               const ComputeScale& scale);

// How a periodic run's sync steps are costed: each blocking at its step (amortisedStep), or, for
// a schedule that lets them overlap (SyncSchedule::overlapped, tau >= 1), each in the background
// until its use tau steps later, queued behind the others on the link (streamingExposedMsPerStep).
enum class SyncCosting {
  as_run,      // overlapped where the trace shows the run's exchanges ran in the background
  overlapped,  // overlapped wherever the schedule allows it (predict's "overlapped ms" what-if)
};

// predictRun with the spread of the steps it came from (its noise).
Predicted predictWithNoise(const RunTimeline& timeline, int workers, const network::NetworkProfile& network,
                           const ComputeBasis& compute, int64_t sync_every, SyncCosting costing = SyncCosting::as_run);

// A periodic step with its exchanges overlapped: `amortised` (local and syncs spread over `every`
// steps, each sync blocking) less the exchanges' exposed time, plus what the background schedule
// leaves exposed. An exchange is a sync step's exposed communication beyond the local step's.
StepPrediction overlappedStep(const StepPrediction& local, const std::vector<StepPrediction>& syncs,
                              StepPrediction amortised, int64_t every, const SyncSchedule& schedule);

// The run's time per step at `workers` on `network` (the building block of the rows): the
// median of its traced steps (predictStep over the workers' programs of each); for a run that
// syncs models, the slowest worker's mean local step (workers meet only at syncs) with the traced
// sync steps spread over `sync_every` steps (amortisedStep; 0: the run's own H), overlapped where
// the run's exchanges ran in the background (SyncCosting::as_run).
StepPrediction predictRun(const RunTimeline& timeline, int workers, const network::NetworkProfile& network,
                          const ComputeBasis& compute = {}, int64_t sync_every = 0);

// The steps the model needs of a run, for break-even searches that replay it at many bandwidths:
// the median step of a run that exchanges every step (on `network` at `workers`); all of a
// periodic run's, whose local steps send nothing and cost the same at any bandwidth.
RunTimeline representativeSteps(const RunTimeline& timeline, int workers, const network::NetworkProfile& network);

// Where predicted(method) - predicted(baseline) turns from negative to non-negative as the
// bandwidth grows (1 Mbit/s to 10 Tbit/s), at latency `latency_s`: +inf when the method is faster
// at every bandwidth searched, 0 when at none.
std::optional<double> breakEven(const RunTimeline& method, const RunTimeline& baseline, int workers, double latency_s,
                                const ComputeBasis& method_compute, const ComputeBasis& baseline_compute,
                                int64_t sync_every);

}  // namespace gcrun::performance
