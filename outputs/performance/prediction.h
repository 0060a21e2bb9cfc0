#pragma once

#include <optional>
#include <string>
#include <vector>

#include "outputs/network/network_profile.h"
#include "outputs/performance/step_model.h"
#include "outputs/performance/step_program.h"
#include "outputs/performance/sync_cost.h"
#include "outputs/report/run_data.h"
#include "outputs/report/target.h"

namespace gcrun::performance {

// A run's traced steps, by logical worker (global rank), read from its trace-rank<r>.json files.
struct RunTimeline {
  std::vector<std::vector<StepProgram>> workers;
  bool truncated = false;  // a trace file's size bound cut its recording short
  SyncSchedule schedule;   // the run's, from its settings
};

// Reads every trace-rank<r>.json in `run.dir` (bounded reads; each file is data, checked by the
// trace reader). A UserError naming the file: a run with no trace file, or none with a complete
// step (with how to record one, output.trace); workers whose traces of one step hold different
// collectives; a run.json world_size outside 1 to network::kMaxWorkers (the default worker count);
// a run that syncs models every H steps whose traced steps are all sync steps or hold none (the
// model needs both: a window of more than H steps, e.g. output.trace=1-2H).
RunTimeline loadRunTimeline(const outputs::RunData& run);

// Runs with their step timelines, each run's traces read once (loadRunTimeline): a report, a
// study's prediction and its projected columns all predict from these.
struct TracedRuns {
  std::vector<outputs::RunData> runs;  // those with a timeline, in the order given
  std::vector<RunTimeline> timelines;  // runs[i]'s
  struct Untraced {
    outputs::RunData run;
    std::string why;  // loadRunTimeline's UserError
  };
  std::vector<Untraced> untraced;  // the others, in the order given
};
TracedRuns traceRuns(std::vector<outputs::RunData> runs);

// --compute-ms-per-batch and --predict compute_ms: a plain decimal above 0 up to this.
inline constexpr double kMaxComputeMsPerBatch = 1e6;
double parseComputeMsPerBatch(const std::string& text, const std::string& what);
// A worker count to predict at: a whole number from 1 to network::kMaxWorkers.
int parseWorkerCount(const std::string& text, const std::string& what);
// --sync-every: H, a whole number from 1 to kMaxSyncEvery.
inline constexpr int64_t kMaxSyncEvery = 1000000;
int64_t parseSyncEvery(const std::string& text, const std::string& what);
// --target-cu: a compute utilisation above 0 up to 1.
double parseTargetCu(const std::string& text, const std::string& what);
// --compute-profile: "shared" (true) or "own" (false).
bool parseComputeProfile(const std::string& text, const std::string& what);

// The compute a prediction replays: the run's own as traced; with `codec_too` (--compute-ms-per-batch:
// another device) every step scaled by one factor, so that its median forward, backward and
// optimizer take `ms_per_batch`, the exchange's own compute (codec, a sync's work) alike; without
// (a compute profile shared by runs of one model) every step of every worker computing exactly
// `ms_per_batch`, each run keeping its own codec.
struct ComputeBasis {
  double ms_per_batch = 0;
  bool codec_too = true;
};

struct PredictOptions {
  std::vector<int> workers;  // empty: each run's own world size
  std::vector<network::NetworkProfile> networks;
  double compute_ms_per_batch = 0;  // > 0: forward, backward, optimizer and codec scaled to this compute
  // Runs of one comparison (task, model, batch) replay one compute at every step: the median over
  // them of each run's median forward+backward+optimizer, so that a busy machine during one run
  // does not decide the answer (a run alone in its comparison keeps its own). false: each its own
  // (the check of a prediction against the run's measurement).
  bool shared_compute = true;
  // What-ifs over H for runs that sync models every H steps (their own H when empty); every-step
  // runs are predicted once whatever these say.
  std::vector<int64_t> sync_every;
  std::optional<double> target_cu;  // --target-cu: recommend the cheapest configuration reaching it
  std::optional<outputs::Target> target;
};

// One run at one worker count on one network.
struct PredictionRow {
  std::string run;  // the run directory's name
  std::string dir;
  std::string reducer;
  std::string strategy;               // sync.strategy
  std::string comparison;             // runs that share it (task, model, batch size) are compared
  std::optional<int64_t> sync_every;  // H of a run that syncs models (its own, or a --sync-every)
  int workers = 1;
  std::string network;
  std::optional<double> measured_ms_per_batch;  // the run's own median, on its own machine and network
  StepPrediction predicted;                     // per step: a periodic run's sync spread over its H steps
  // The usual analytic CU at this H (formulaCu): the local step's compute against one exchange of
  // the sync's bytes at the network's bandwidth; an every-step run's at H = 1.
  std::optional<double> cu_formula;
  // streaming-diloco: the time per step if each fragment's exchange ran in the background until
  // its use sync.delay steps later (streamingExposedMsPerStep); gcrun's sends block.
  std::optional<double> overlapped_ms;
  double compute_basis_ms = 0;  // the forward+backward+optimizer per batch it was predicted with
  double mib_per_step = 0;      // sent by one worker, per step (a periodic run's sync over its H steps)
  double mib_per_sync = 0;      // sent by one worker in one sync step (every step: the same)
  // The full- and half-precision baselines' (exact's and fp16's; RunData::baseline) predicted time
  // over this one's, for comparable runs.
  std::optional<double> speedup_vs_exact, speedup_vs_fp16;
  // The relative spread of this prediction and its baselines' (half the interquartile range of
  // their traced steps' predictions over the median, the larger, and at least 1%); a speedup
  // within 1 ± noise is "no difference".
  double noise = 0;
  // The bandwidth (bytes/s) below which this run's method is faster than the baseline, at this
  // worker count and the network's latency; +inf: faster at every bandwidth searched
  // (1 Mbit/s to 10 Tbit/s), 0: never. None for the baseline's own rows (its speedup is 1).
  std::optional<double> break_even_vs_exact, break_even_vs_fp16;
  // With a target: the steps the run took to reach it (its first evaluation at or past it), that
  // many steps at the predicted time per batch, and the run's measured wall-clock time to it.
  std::optional<int64_t> steps_to_target;
  std::optional<double> predicted_time_to_target_s, measured_time_to_target_s;
};

// Every run x H x worker count x network, in that order. Each prediction is predictRun's.
std::vector<PredictionRow> predictRuns(const std::vector<outputs::RunData>& runs,
                                       const std::vector<RunTimeline>& timelines, const PredictOptions& options);

// The run's time per step at `workers` on `network` (the building block of predictRuns): the
// median of its traced steps (predictStep over the workers' programs of each); for a run that
// syncs models, the slowest worker's mean local step (workers meet only at syncs) with the traced
// sync steps spread over `sync_every` steps (amortisedStep; 0: the run's own H).
StepPrediction predictRun(const RunTimeline& timeline, int workers, const network::NetworkProfile& network,
                          const ComputeBasis& compute = {}, int64_t sync_every = 0);

// Each run's compute basis under `options` (runs[i]'s at [i]): --compute-ms-per-batch, else the
// comparison's shared profile, else the run's own.
std::vector<ComputeBasis> computeBases(const std::vector<outputs::RunData>& runs,
                                       const std::vector<RunTimeline>& timelines, const PredictOptions& options);

// One line per comparison whose runs should compute alike but were measured to differ beyond
// their steps' spread (a busy machine during one of them), naming the runs and their times.
std::vector<std::string> computeMismatches(const std::vector<outputs::RunData>& runs,
                                           const std::vector<RunTimeline>& timelines);

// "no difference" when the speedup is within 1 ± noise, else "1.23x".
std::string speedupText(const std::optional<double>& speedup, double noise);

// The text of a break-even bandwidth: "below 3.2gbit", "always", "never".
std::string breakEvenText(const std::optional<double>& bytes_per_s);

}  // namespace gcrun::performance
