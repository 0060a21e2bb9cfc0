#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "outputs/performance/compute_basis.h"
#include "outputs/performance/predict_options.h"
#include "outputs/performance/replay.h"
#include "outputs/performance/run_timeline.h"
#include "outputs/performance/step_model.h"
#include "outputs/report/run_data.h"

namespace gcrun::performance {

// One run at one worker count on one network.
struct PredictionRow {
  std::string run;  // the run directory's name
  std::string dir;
  std::string reducer;
  std::string strategy;               // the strategy whose schedule it is (SyncSchedule::strategy)
  std::string comparison;             // runs that share it (task, model, batch size) are compared
  std::optional<int64_t> sync_every;  // H of a run that syncs models (its own, or a --sync-every)
  int workers = 1;
  std::string network;
  // The run's own time per step, on its own machine and network: its median step, or, where its
  // steps differ by its schedule (local steps and syncs), its mean step over the schedule.
  std::optional<double> measured_ms_per_batch;
  std::string measured_statistic;  // "median" or "mean"; empty without a measurement
  StepPrediction predicted;        // per step: a periodic run's sync spread over its H steps
  // The usual analytic CU at this H (formulaCu): the local step's compute against one exchange of
  // the sync's bytes at the network's bandwidth; a run that exchanges every step at H = 1.
  std::optional<double> cu_formula;
  // A schedule whose sends may overlap compute: the time per step if each exchange ran in the
  // background until its use (SyncColumns::overlapped_ms); gcrun's sends block.
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
  // What the quality rule weighs (quality_rule.h): the run's configuration (its seeds share it),
  // its main metric and that metric's final value, where it has one.
  std::string configuration;
  std::string metric;
  std::optional<double> final_value;
};

// Whether `row` is a baseline's own row, exact's (fp16's): it has a speedup against that baseline
// (1) but, unlike the methods compared with it, no break-even bandwidth.
inline bool isExactBaseline(const PredictionRow& row) { return row.speedup_vs_exact && !row.break_even_vs_exact; }
inline bool isFp16Baseline(const PredictionRow& row) { return row.speedup_vs_fp16 && !row.break_even_vs_fp16; }

// Every run x H x worker count x network of `grid`, in that order, each run replaying its compute
// basis (replayedRuns). Each prediction is predictRun's.
std::vector<PredictionRow> predictRows(const std::vector<outputs::RunData>& runs, const ReplayedRuns& replayed,
                                       const PredictGrid& grid);
// predictRows at the compute bases that `options` chooses.
std::vector<PredictionRow> predictRuns(const std::vector<outputs::RunData>& runs,
                                       const std::vector<RunTimeline>& timelines, const PredictOptions& options);

}  // namespace gcrun::performance
