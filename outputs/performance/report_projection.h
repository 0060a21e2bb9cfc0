#pragma once

#include <string>
#include <vector>

#include "outputs/network/network_profile.h"
#include "outputs/performance/prediction.h"
#include "outputs/report/report.h"

namespace gcrun::performance {

// `gcrun report --predict workers=16,bandwidth=10gbit[,latency=20us]` or
// `workers=16,network=FILE`: one worker count and one network for the report's projected columns.
struct ProjectionSpec {
  int workers = 16;
  network::NetworkProfile network;
  double compute_ms_per_batch = 0;
  int64_t sync_every = 0;  // > 0: runs that sync models projected at this H
};
// Keys: workers (parseWorkerCount), bandwidth and latency (default units::kDefaultLatency), or
// network (a profile file), compute_ms (parseComputeMsPerBatch) and sync_every (parseSyncEvery). Throws UserError
// naming `what`, the key and what would be accepted.
ProjectionSpec parseProjection(const std::string& text, const std::string& what);

// The projections of the runs with a step timeline; the others have none.
outputs::ReportProjection projectRuns(const TracedRuns& traced, const ProjectionSpec& spec);

// A study's prediction as a report section, folded in HTML: `rows` (predictRuns over `options`),
// one per run x workers x network; runs without a step timeline have none.
outputs::ReportSection predictionSection(const std::vector<PredictionRow>& rows, const PredictOptions& options);

// The sections that open a study's report: per comparison, the fastest-method matrix with its
// heat map (prediction_matrix.h) and the quality rule's sentence; with options.target_cu the first
// carries the recommendations.
std::vector<outputs::ReportSection> matrixSections(const std::vector<PredictionRow>& rows,
                                                   const PredictOptions& options);

}  // namespace gcrun::performance
