#pragma once

#include <string>
#include <vector>

#include "outputs/performance/prediction.h"
#include "outputs/report/plots.h"
#include "outputs/report/summary.h"

namespace gcrun::performance {

// The prediction table: one row per run x workers x network, text cells (Markdown escapes them).
outputs::TextTable predictionTable(const std::vector<PredictionRow>& rows, bool with_target);
// predict.csv: the same rows with raw numbers; text cells through csvField. Columns: run, reducer,
// workers, network, measured_ms_per_batch, predicted_ms_per_batch, compute_ms, exposed_comm_ms,
// codec_ms, mib_per_step, speedup_vs_exact, speedup_vs_fp16, break_even_vs_exact_gbit,
// break_even_vs_fp16_gbit (inf: always, 0: never), with a target steps_to_target,
// predicted_time_to_target_s, measured_time_to_target_s, then strategy, sync_every, cu, cu_formula,
// overlapped_ms_per_batch, compute_basis_ms, mib_per_sync and noise.
std::string predictionCsv(const std::vector<PredictionRow>& rows, bool with_target);

// The figures: for each worker count, predicted time per batch against bandwidth (log axes, one
// curve per run name with its seeds' band, 100 Mbit/s to 100 Gbit/s at the first network's
// latency, break-even points against exact marked), and each run's metric against its predicted
// wall-clock time (steps x predicted time per batch) at the first worker count and network, then
// each comparison's heat map of the fastest method (matrixHeatMaps).
std::vector<outputs::Plot> predictionPlots(const std::vector<outputs::RunData>& runs,
                                           const std::vector<RunTimeline>& timelines,
                                           const std::vector<PredictionRow>& rows, const PredictOptions& options);

struct PredictionFiles {
  std::vector<std::string> files;  // written: predict.md, predict.csv, then the plots
  std::string note;                // why plots are missing, if they are
};

// Writes predict.md (opening with the fastest-method matrices, matrixMarkdown, then the runs whose
// compute differs beyond the noise and the recommendations, then the full table), predict.csv and
// plots/ into `output_dir` (created), through files::Directory: a symlink planted there is
// replaced, never written through.
PredictionFiles writePrediction(const std::vector<outputs::RunData>& runs, const std::vector<RunTimeline>& timelines,
                                const std::vector<PredictionRow>& rows, const PredictOptions& options,
                                const std::string& output_dir);

// The lines gcrun predict lists as skipped for the runs of `traced` without a step timeline, each
// "why (it is <status>)". A completed run among them is a UserError (its timeline is missing or
// bad: why), and so is `traced` without a run that has one (none found under `where`).
std::vector<std::string> checkPredictable(const TracedRuns& traced, const std::string& where);

// `gcrun predict`: the runs at or below `paths` (a study directory, say), predicted and written
// into `output_dir`. A completed run without a step timeline is a UserError naming it; runs that
// did not complete and have none, and unreadable ones, are left out with a line in `skipped`.
struct PredictResult {
  std::vector<PredictionRow> rows;
  PredictionFiles files;
  std::vector<std::string> skipped;
  std::vector<std::string> mismatches;       // computeMismatches
  std::vector<std::string> recommendations;  // recommendationLines
};

// With options.target_cu, recommendationLine() for each worker count and network; else none.
std::vector<std::string> recommendationLines(const std::vector<PredictionRow>& rows, const PredictOptions& options);
PredictResult predictDirectories(const std::vector<std::string>& paths, const PredictOptions& options,
                                 const std::string& output_dir);

}  // namespace gcrun::performance
