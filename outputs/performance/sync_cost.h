#pragma once

#include <cstdint>
#include <vector>

#include "outputs/performance/step_model.h"

namespace gcrun::performance {

// The time per step of a periodic run at period `every` (H): its local step plus each sync step's
// extra over it, `fragments` of them per period, spread over the period's H steps:
//   t(H) = local + (F / H) * (mean(sync) - local),
// each part (compute, codec, exposed communication) alike. `syncs` are the traced sync steps'
// predictions (one or more).
StepPrediction amortisedStep(const StepPrediction& local, const std::vector<StepPrediction>& syncs, int64_t every,
                             int64_t fragments);

// The time of a run whose schedule overlaps its sends (SyncSchedule::overlapped) with its
// exchanges in the background (streaming-diloco at tau >= 1):
// fragment f's exchange of `exchange_ms` starts at its step, after
// the exchanges queued before it on the network, and must be done `delay` steps later, when its
// average is applied; a worker waits for what is not. Fragments send at steps spaced H/F apart,
// steps take `step_ms` (a local step). Returns the exposed wait per step, over a steady period.
// With tau < H/F (all that gcrun's strategies declare) each exchange is applied before the next
// starts; larger delays queue them behind each other.
double streamingExposedMsPerStep(double step_ms, const std::vector<double>& exchange_ms, int64_t every, int64_t delay);

// The analytic compute utilisation that papers quote (e.g. DiLoCo's): H steps of compute against
// one blocking exchange of `bytes` at `bandwidth_bytes_per_s`, without latency, the ring's
// factors or overlap:  CU = H t_c / (H t_c + 8 bytes / B_bits)  (with B in bytes/s: bytes / B).
double formulaCu(double compute_ms, int64_t every, double bytes, double bandwidth_bytes_per_s);

}  // namespace gcrun::performance
