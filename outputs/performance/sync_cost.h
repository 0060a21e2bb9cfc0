#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "outputs/performance/step_model.h"
#include "outputs/report/run_data.h"

namespace gcrun::performance {

// When a run's workers exchange: every step (every-step's gradients, demo's payload), or their
// models every H steps (local-sgd, diloco, sparseloco; streaming-diloco with F fragments, each at a
// step of its own once per period), as the run's configuration (sync.*) says.
struct SyncSchedule {
  std::string strategy = "every-step";
  bool periodic = false;  // syncs models every `every` steps; the steps between send nothing
  int64_t every = 1;      // H
  int64_t fragments = 1;  // F: sync steps per period
  int64_t delay = 0;      // streaming-diloco's tau: steps between a fragment's send and its use
  int64_t warmup = 0;     // local-sgd's first steps, which exchange gradients: not the schedule's
};

// The run's schedule from its settings: a strategy with a sync.every key syncs every that many
// steps; the others exchange every step. A run from before strategies existed is every-step. Its
// config.yaml is data: an unknown strategy or a value out of range (sync.every from 1 to
// kMaxSyncEvery, sync.fragments and sync.delay up to sync.every) is a UserError naming the file
// and key.
SyncSchedule syncScheduleOf(const outputs::RunData& run);

// The time per step of a periodic run at period `every` (H): its local step plus each sync step's
// extra over it, `fragments` of them per period, spread over the period's H steps:
//   t(H) = local + (F / H) * (mean(sync) - local),
// each part (compute, codec, exposed communication) alike. `syncs` are the traced sync steps'
// predictions (one or more).
StepPrediction amortisedStep(const StepPrediction& local, const std::vector<StepPrediction>& syncs, int64_t every,
                             int64_t fragments);

// streaming-diloco run with its exchanges in the background (what its schedule allows, not what
// gcrun's blocking sends do): fragment f's exchange of `exchange_ms` starts at its step, after
// the exchanges queued before it on the network, and must be done `delay` steps later, when its
// average is applied; a worker waits for what is not. Fragments send at steps spaced H/F apart,
// steps take `step_ms` (a local step). Returns the exposed wait per step, over a steady period.
// With tau < H/F (all gcrun's streaming-diloco accepts) each exchange is applied before the next
// starts; larger delays queue them behind each other.
double streamingExposedMsPerStep(double step_ms, const std::vector<double>& exchange_ms, int64_t every, int64_t delay);

// The analytic compute utilisation that papers quote (e.g. DiLoCo's): H steps of compute against
// one blocking exchange of `bytes` at `bandwidth_bytes_per_s`, without latency, the ring's
// factors or overlap:  CU = H t_c / (H t_c + 8 bytes / B_bits)  (with B in bytes/s: bytes / B).
double formulaCu(double compute_ms, int64_t every, double bytes, double bandwidth_bytes_per_s);

}  // namespace gcrun::performance
