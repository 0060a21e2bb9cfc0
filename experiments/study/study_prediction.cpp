#include "experiments/study/study_prediction.h"

#include <cstdio>

#include "hyperparams/base/errors.h"
#include "outputs/network/network_profile.h"
#include "outputs/performance/prediction_output.h"
#include "outputs/performance/report_projection.h"

namespace gcrun::experiments {

void addPrediction(const StudySpec::Prediction& prediction, const std::string& dir,
                   const std::vector<outputs::RunData>& runs, outputs::ReportOptions& report) {
  performance::PredictOptions options;
  options.workers = prediction.workers;
  const double latency = units::parseDuration(prediction.latency, "predict.latency");
  for (const auto& bandwidth : prediction.bandwidths) {
    options.networks.push_back(network::linkProfile(units::parseBandwidth(bandwidth, "predict.bandwidth"), latency));
  }
  report.sections.push_back(performance::predictionSection(runs, options));
  if (!prediction.headline.empty()) {
    report.projection =
        performance::projectRuns(runs, performance::parseProjection(prediction.headline, "predict.headline"));
  }
  try {
    const auto predicted = performance::predictDirectories({dir + "/runs"}, options, dir + "/predict");
    std::printf("study: prediction in %s/predict/predict.md\n", dir.c_str());
    if (!predicted.files.note.empty()) std::printf("study: %s\n", predicted.files.note.c_str());
  } catch (const UserError& e) {
    std::printf("study: no prediction files: %s\n", e.what());
  }
}

}  // namespace gcrun::experiments
