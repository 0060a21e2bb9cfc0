#include "experiments/study/study_prediction.h"

#include <cstdio>

#include "hyperparams/base/errors.h"
#include "outputs/network/network_profile.h"
#include "outputs/performance/prediction_output.h"
#include "outputs/performance/report_projection.h"

namespace gcrun::experiments {

void addPrediction(const StudySpec::Prediction& prediction, const outputs::StudyDirectory& study,
                   const std::vector<outputs::RunData>& runs, outputs::ReportOptions& report) {
  performance::PredictOptions options;
  options.workers = prediction.workers;
  options.sync_every = prediction.sync_every;
  options.target_cu = prediction.target_cu;
  options.quality = prediction.quality;
  for (double bandwidth : prediction.bandwidths) {
    options.networks.push_back(network::linkProfile(bandwidth, prediction.latency_s));
  }
  const auto traced = performance::traceRuns(runs);
  const auto rows = performance::predictRuns(traced.runs, traced.timelines, options);
  auto table = performance::predictionSection(rows, options);
  if (prediction.headline) report.projection = performance::projectRuns(traced, *prediction.headline);
  try {
    performance::checkPredictable(traced, study.pathOf(outputs::study_files::kRuns));
    const auto files = performance::writePrediction(traced.runs, traced.timelines, rows, options, study.predictPath());
    std::printf("study: prediction in %s\n", files.files.front().c_str());  // predict.md
    if (!files.note.empty()) std::printf("study: %s\n", files.note.c_str());
    table.link = std::string(outputs::study_files::kPredict) + "/predict.csv";  // the report is beside predict/
  } catch (const UserError& e) {
    std::printf("study: no prediction files: %s\n", e.what());
  }
  for (auto& section : performance::matrixSections(rows, options)) report.sections.push_back(std::move(section));
  report.sections.push_back(std::move(table));
}

}  // namespace gcrun::experiments
