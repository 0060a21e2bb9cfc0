#pragma once

#include <cstdint>
#include <optional>

#include "outputs/network/network_profile.h"
#include "outputs/performance/predict_options.h"
#include "outputs/performance/run_timeline.h"

namespace gcrun::performance {

// What a row shows of a run's schedule at period `every` (H) on `network` at `workers`.
struct SyncColumns {
  double mib_per_sync = 0;  // sent by one worker in one sync step (every step: the same)
  double mib_per_step = 0;  // sent by one worker, per step (a periodic run's syncs over its H steps)
  // The usual analytic CU at this H (formulaCu): `compute_ms` against one exchange of the sync's
  // bytes at the network's bandwidth; a run that exchanges every step at H = 1. None on one worker
  // or a network without a bandwidth.
  std::optional<double> cu_formula;
  // A schedule whose sends may overlap compute (SyncSchedule::overlapped): the time per step with
  // each exchange in the background until its use `delay` steps later (streamingExposedMsPerStep),
  // whether or not the run's own exchanges ran so.
  std::optional<double> overlapped_ms;
};
SyncColumns syncColumns(const RunTimeline& timeline, int workers, const network::NetworkProfile& network,
                        const ComputeBasis& compute, int64_t every, double compute_ms);

}  // namespace gcrun::performance
