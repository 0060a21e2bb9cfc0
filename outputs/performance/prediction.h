#pragma once

#include <optional>
#include <string>
#include <vector>

#include "outputs/network/network_profile.h"
#include "outputs/performance/step_model.h"
#include "outputs/performance/step_program.h"
#include "outputs/report/run_data.h"
#include "outputs/report/target.h"

namespace gcrun::performance {

// A run's traced steps, by logical worker (global rank), read from its trace-rank<r>.json files.
struct RunTimeline {
  std::vector<std::vector<StepProgram>> workers;
  bool truncated = false;  // a trace file's size bound cut its recording short
};

// Reads every trace-rank<r>.json in `run.dir` (bounded reads; each file is data, checked by the
// trace reader). A UserError naming the file: a run with no trace file, or none with a complete
// step (with how to record one, output.trace); workers whose traces of one step hold different
// collectives; a run.json world_size outside 1 to network::kMaxWorkers (the default worker count).
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

struct PredictOptions {
  std::vector<int> workers;  // empty: each run's own world size
  std::vector<network::NetworkProfile> networks;
  double compute_ms_per_batch = 0;  // > 0: forward, backward, optimizer and codec scaled to this compute
  std::optional<outputs::Target> target;
};

// One run at one worker count on one network.
struct PredictionRow {
  std::string run;  // the run directory's name
  std::string dir;
  std::string reducer;
  std::string comparison;  // runs that share it (task, model, batch size) are compared
  int workers = 1;
  std::string network;
  std::optional<double> measured_ms_per_batch;  // the run's own median, on its own machine and network
  StepPrediction predicted;
  double mib_per_step = 0;  // sent by one worker
  // The full- and half-precision baselines' (exact's and fp16's; RunData::baseline) predicted time
  // over this one's, for comparable runs.
  std::optional<double> speedup_vs_exact, speedup_vs_fp16;
  // The relative spread of this prediction and its baselines' (half the interquartile range of
  // their traced steps' predictions over the median, the larger); a speedup within 1 ± noise is
  // "no difference".
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

// Every run x worker count x network, in that order. Each prediction is the median step of the
// run's traced steps (predictStep over the workers' programs of that step).
std::vector<PredictionRow> predictRuns(const std::vector<outputs::RunData>& runs,
                                       const std::vector<RunTimeline>& timelines, const PredictOptions& options);

// The run's median traced step at `workers` on `network` (the building block of predictRuns).
StepPrediction predictRun(const RunTimeline& timeline, int workers, const network::NetworkProfile& network,
                          double compute_ms_per_batch = 0);

// The text of a break-even bandwidth: "below 3.2gbit", "always", "never".
std::string breakEvenText(const std::optional<double>& bytes_per_s);

}  // namespace gcrun::performance
