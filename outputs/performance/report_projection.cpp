#include "outputs/performance/report_projection.h"

#include <map>
#include <sstream>

#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"
#include "hyperparams/base/units.h"
#include "outputs/performance/prediction_matrix.h"
#include "outputs/performance/prediction_output.h"

namespace gcrun::performance {
namespace {

const std::string kProjectionForm = std::string("workers=N,bandwidth=10gbit[,latency=") + units::kDefaultLatency +
                                    "][,compute_ms=MS][,sync_every=H] or workers=N,network=FILE";

}  // namespace

ProjectionSpec parseProjection(const std::string& text, const std::string& what) {
  std::map<std::string, std::string> values;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    const auto equals = item.find('=');
    const auto key = item.substr(0, equals);
    if (equals == std::string::npos || values.count(key) ||
        (key != "workers" && key != "bandwidth" && key != "latency" && key != "network" && key != "compute_ms" &&
         key != "sync_every")) {
      throw UserError(what + ": '" + clipForMessage(item, 60) + "' is not one of " + kProjectionForm);
    }
    values[key] = item.substr(equals + 1);
  }
  ProjectionSpec spec;
  if (values.count("workers")) spec.workers = parseWorkerCount(values["workers"], what + " workers");
  if (values.count("compute_ms")) {
    spec.compute_ms_per_batch = parseComputeMsPerBatch(values["compute_ms"], what + " compute_ms");
  }
  if (values.count("sync_every")) spec.sync_every = parseSyncEvery(values["sync_every"], what + " sync_every");
  if (values.count("network") == values.count("bandwidth")) {
    throw UserError(what + ": give either bandwidth or network: " + kProjectionForm);
  }
  if (values.count("network")) {
    spec.network = network::loadProfile(values["network"]);
  } else {
    const double latency =
        units::parseDuration(values.count("latency") ? values["latency"] : units::kDefaultLatency, what);
    spec.network = network::linkProfile(units::parseBandwidth(values["bandwidth"], what), latency);
  }
  return spec;
}

outputs::ReportProjection projectRuns(const TracedRuns& traced, const ProjectionSpec& spec) {
  outputs::ReportProjection projection;
  projection.label = std::to_string(spec.workers) + " workers, " + spec.network.name;
  PredictOptions options;
  options.workers = {spec.workers};
  options.networks = {spec.network};
  options.compute_ms_per_batch = spec.compute_ms_per_batch;
  if (spec.sync_every > 0) {
    options.sync_every = {spec.sync_every};
    projection.label += ", H=" + std::to_string(spec.sync_every);
  }
  for (const auto& row : predictRuns(traced.runs, traced.timelines, options)) {
    projection.by_dir[row.dir] = {row.predicted.total_ms, row.predicted.cu(), row.speedup_vs_exact,
                                  row.speedup_vs_fp16};
  }
  return projection;
}

outputs::ReportSection predictionSection(const std::vector<PredictionRow>& rows, const PredictOptions& options) {
  outputs::ReportSection section;
  section.title = "Does compression pay? Predicted time per batch";
  section.text =
      "Each traced run replayed at other worker counts and networks (gcrun predict; docs/predict.md states the "
      "model's assumptions). Runs without a step timeline are not listed.";
  section.table = predictionTable(rows, options.target.has_value());
  section.folded = true;
  return section;
}

std::vector<outputs::ReportSection> matrixSections(const std::vector<PredictionRow>& rows,
                                                   const PredictOptions& options) {
  std::vector<outputs::ReportSection> sections;
  const auto quality = qualityRule(rows, options);
  const auto matrices = predictionMatrices(rows, quality);
  const auto heat_maps = matrixHeatMaps(rows, quality);
  for (size_t i = 0; i < matrices.size(); ++i) {
    outputs::ReportSection section;
    section.title = "Does compression pay? The fastest method";
    if (matrices.size() > 1) section.title += ": " + matrices[i].runs;
    section.text = std::string(kMatrixLegend) + "\n" + quality.sentence;
    section.table = matrixTable(matrices[i]);
    section.plots = {heat_maps[i]};
    section.leading = true;
    sections.push_back(std::move(section));
  }
  // The recommendation answers the time question too: it goes with the first matrix.
  if (!sections.empty()) {
    for (const auto& line : recommendationLines(rows, options.target_cu, quality))
      sections.front().text += "\nRecommended: " + line + ".";
  }
  return sections;
}

}  // namespace gcrun::performance
