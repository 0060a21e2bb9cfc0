#pragma once

#include <string>
#include <vector>

#include "outputs/performance/prediction.h"
#include "outputs/performance/prediction_table.h"
#include "outputs/performance/quality_rule.h"
#include "outputs/performance/recommendation.h"
#include "outputs/report/plots.h"
#include "outputs/report/summary.h"

namespace gcrun::performance {

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

// Writes predict.md (opening with the fastest-method matrices and the quality rule, matrixMarkdown, then the runs whose
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

// `gcrun predict`: the runs at or below `paths` (a study directory, say), predicted; what to write
// of them, writePrediction (as a study's prediction does). A completed run without a step
// timeline is a UserError naming it; runs that did not complete and have none, and unreadable
// ones, are left out with a line in `skipped`.
struct PredictResult {
  TracedRuns traced;  // the runs predicted, with their timelines
  std::vector<PredictionRow> rows;
  std::vector<std::string> skipped;
  std::vector<std::string> mismatches;       // computeMismatches
  QualityRule quality;                       // which methods the answer may name (quality_rule.h)
  std::vector<std::string> recommendations;  // recommendationLines
};
PredictResult predictDirectories(const std::vector<std::string>& paths, const PredictOptions& options);

}  // namespace gcrun::performance
