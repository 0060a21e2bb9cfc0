#include "outputs/performance/prediction_output.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <spdlog/fmt/fmt.h>

#include "hyperparams/base/errors.h"
#include "outputs/files/safe_files.h"
#include "outputs/performance/collective_cost.h"
#include "outputs/performance/compute_basis.h"
#include "outputs/performance/prediction_matrix.h"
#include "outputs/performance/quality_rule.h"
#include "outputs/performance/recommendation.h"
#include "outputs/report/safe_text.h"

namespace gcrun::performance {
namespace {

constexpr double kPlotFromBandwidth = 1e8 / 8;  // 100 Mbit/s
constexpr double kPlotToBandwidth = 1e11 / 8;   // 100 Gbit/s
constexpr int kPlotPoints = 25;

const char kAssumptions[] =
    "Each run's traced steps are replayed at the given worker count and network: the compute as measured, "
    "with runs of one model and batch replaying the same forward+backward+optimizer time (the median over "
    "them; --compute-profile own keeps each run's, --compute-ms-per-batch sets it), each collective costed "
    "from its bytes and data type (ring all-reduce, ring all-gather, binomial broadcast) on the network "
    "profile, collectives one after another in issue order, all-reduces issued during backward overlapping "
    "it. The median traced step is shown; a run that syncs models every H steps shows its median local step "
    "with its traced sync steps spread over the H steps. CU is compute over time per step, beside the usual "
    "formula H t / (H t + 8 bytes / bandwidth). Measured is the run's own median step on its own machine and "
    "network; for a run that syncs models every H steps, whose steps differ, the mean over the schedule, "
    "marked (mean) (empty for other worker counts, other H and simulated workers). Speedups are the baseline's "
    "predicted time over this run's, \"no difference\" within the steps' spread; break-even is the bandwidth "
    "below which this method is faster than the baseline at the network's latency.";

std::string runNameOf(const outputs::RunData& run) { return run.name.empty() ? run.dir : run.name; }

}  // namespace

namespace {

// The runs' indices by configuration name (the seeds of one configuration together), in order.
std::vector<std::pair<std::string, std::vector<size_t>>> configurationsOf(const std::vector<outputs::RunData>& runs) {
  std::vector<std::pair<std::string, std::vector<size_t>>> configurations;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto [at, added] = index.emplace(runNameOf(runs[i]), configurations.size());
    if (added) configurations.push_back({runNameOf(runs[i]), {}});
    configurations[at->second].second.push_back(i);
  }
  return configurations;
}

// One configuration's predicted time per batch from kPlotFromBandwidth to kPlotToBandwidth, mean
// and spread over its seeds.
outputs::Curve timeOverBandwidth(const std::string& name, const std::vector<size_t>& seeds,
                                 const std::vector<RunTimeline>& timelines, int workers, double latency,
                                 const std::vector<ComputeBasis>& bases) {
  outputs::Curve curve{name, {}};
  for (int k = 0; k < kPlotPoints; ++k) {
    const double bandwidth =
        kPlotFromBandwidth * std::pow(kPlotToBandwidth / kPlotFromBandwidth, double(k) / (kPlotPoints - 1));
    std::vector<double> times;
    for (const size_t i : seeds) {
      times.push_back(predictRun(timelines[i], workers, network::linkProfile(bandwidth, latency), bases[i]).total_ms);
    }
    const auto spread = outputs::spreadOf(times);
    curve.points.push_back({8 * bandwidth / 1e9, spread.mean, spread.min, spread.max});
  }
  return curve;
}

// Predicted time per batch against bandwidth at `workers`, on the first network's latency, with
// each configuration's break-even point against exact marked.
outputs::Plot timeVsBandwidthPlot(const std::vector<outputs::RunData>& runs, const std::vector<RunTimeline>& timelines,
                                  const std::vector<PredictionRow>& rows, const PredictOptions& options, int workers) {
  const auto& first_network = options.networks.front();
  const double latency = latencyOf(first_network, workers);
  outputs::Plot plot{fmt::format("predicted-time-vs-bandwidth-w{}", workers),
                     fmt::format("predicted time per batch, {} workers, latency {:.3g} us", workers, 1e6 * latency),
                     "bandwidth (Gbit/s)",
                     "ms per batch",
                     {},
                     true,
                     true};
  outputs::Curve marks{"break-even vs exact", {}, true};
  const auto bases = computeBases(runs, timelines, options);
  for (const auto& [name, seeds] : configurationsOf(runs)) {
    plot.curves.push_back(timeOverBandwidth(name, seeds, timelines, workers, latency, bases));
    for (const auto& row : rows) {
      if (row.workers != workers || row.network != first_network.name || row.dir != runs[seeds[0]].dir) continue;
      const auto& point = row.break_even_vs_exact;
      if (!point || *point <= 0 || std::isinf(*point)) continue;
      const double at =
          predictRun(timelines[seeds[0]], workers, network::linkProfile(*point, latency), bases[seeds[0]]).total_ms;
      marks.points.push_back({8 * *point / 1e9, at, at, at});
    }
  }
  if (!marks.points.empty()) plot.curves.push_back(std::move(marks));
  return plot;
}

// Each run's target metric against its predicted wall-clock time at `workers` on `network`.
outputs::Plot metricVsTimePlot(const std::vector<outputs::RunData>& runs, const std::vector<RunTimeline>& timelines,
                               const std::vector<PredictionRow>& rows, int workers, const std::string& network) {
  outputs::Plot plot{
      "metric-vs-predicted-time",
      fmt::format("{} by predicted wall-clock time, {} workers, {}", runs.front().metric, workers, network),
      "predicted training time (s)",
      runs.front().metric,
      {}};
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto found = std::find_if(rows.begin(), rows.end(), [&](const PredictionRow& row) {
      return row.dir == runs[i].dir && row.workers == workers && row.network == network &&
             (!row.sync_every || *row.sync_every == timelines[i].schedule.every);
    });
    if (found == rows.end() || runs[i].epochs.empty()) continue;
    outputs::Curve curve{found->run, {}};
    for (const auto& point : runs[i].epochs) {
      const double seconds = point.step * found->predicted.total_ms / 1000;
      curve.points.push_back({seconds, point.metric, point.metric, point.metric});
    }
    plot.curves.push_back(std::move(curve));
  }
  return plot;
}

}  // namespace

std::vector<outputs::Plot> predictionPlots(const std::vector<outputs::RunData>& runs,
                                           const std::vector<RunTimeline>& timelines,
                                           const std::vector<PredictionRow>& rows, const PredictOptions& options) {
  std::vector<outputs::Plot> plots;
  if (runs.empty() || options.networks.empty()) return plots;
  std::vector<int> worker_counts = options.workers;
  if (worker_counts.empty()) worker_counts.push_back(runs.front().world_size);
  for (const int workers : worker_counts) plots.push_back(timeVsBandwidthPlot(runs, timelines, rows, options, workers));
  plots.push_back(metricVsTimePlot(runs, timelines, rows, worker_counts.front(), options.networks.front().name));
  for (auto& heat_map : matrixHeatMaps(rows, qualityRule(rows, options))) plots.push_back(std::move(heat_map));
  return plots;
}

namespace {

std::string bulletList(const std::string& title, const std::vector<std::string>& lines) {
  if (lines.empty()) return "";
  std::string md = "## " + title + "\n\n";
  for (const auto& line : lines) md += "- " + outputs::markdownText(line) + "\n";
  return md + "\n";
}

}  // namespace

PredictionFiles writePrediction(const std::vector<outputs::RunData>& runs, const std::vector<RunTimeline>& timelines,
                                const std::vector<PredictionRow>& rows, const PredictOptions& options,
                                const std::string& output_dir) {
  const auto dir = files::Directory::open(output_dir, true);
  const bool with_target = options.target.has_value();
  PredictionFiles written;
  const auto plots_dir = dir.sub("plots", true);
  const auto rendered = outputs::renderPlots(predictionPlots(runs, timelines, rows, options), plots_dir);
  written.note = rendered.note;
  const auto quality = qualityRule(rows, options);
  std::string md = "# gcrun predict\n\n" + matrixMarkdown(rows, quality) + "\n" + std::string(kAssumptions) + "\n\n";
  md += bulletList("Compute", computeMismatches(runs, timelines));
  if (options.target_cu) {
    md += bulletList(fmt::format("Recommended for CU {:.2f}", *options.target_cu),
                     recommendationLines(rows, options.target_cu, quality));
  }
  if (with_target) {
    md += outputs::markdownText(fmt::format("Target: {} {} {}.", options.target->metric,
                                            options.target->lower_is_better ? "<=" : ">=", options.target->value)) +
          "\n\n";
  }
  md += outputs::markdownTable(predictionTable(rows, with_target)) + "\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    if (timelines[i].truncated) {
      md += "\n" + outputs::markdownText(runs[i].dir + ": its trace hit the size bound; fewer steps were recorded.");
    }
  }
  if (!rendered.images.empty()) md += "\n## Plots\n\n";
  for (const auto& image : rendered.images) {
    if (image.size() > 4 && image.compare(image.size() - 4, 4, ".png") == 0) {
      const auto name = image.substr(image.rfind('/') + 1);
      md += "![" + outputs::markdownText(name) + "](plots/" + name + ")\n";
    }
  }
  dir.writeAtomically("predict.md", md);
  dir.writeAtomically("predict.csv", predictionCsv(rows, with_target));
  written.files = {dir.pathOf("predict.md"), dir.pathOf("predict.csv")};
  written.files.insert(written.files.end(), rendered.images.begin(), rendered.images.end());
  return written;
}

std::vector<std::string> checkPredictable(const TracedRuns& traced, const std::string& where) {
  std::vector<std::string> skipped;
  for (const auto& [run, why] : traced.untraced) {
    if (run.status == outputs::RunStatus::completed) throw UserError(why);
    skipped.push_back(why + " (it is " + outputs::statusLabel(run) + ")");
  }
  if (traced.runs.empty()) {
    throw UserError("predict: no run with a step timeline found under " + where +
                    " (run with --set output.trace=A-B to record one)");
  }
  return skipped;
}

PredictResult predictDirectories(const std::vector<std::string>& paths, const PredictOptions& options) {
  auto loaded = outputs::loadRuns(paths, options.target ? options.target->metric : "");
  PredictResult result;
  result.traced = traceRuns(std::move(loaded.runs));
  std::string given;
  for (const auto& path : paths) given += (given.empty() ? "" : ", ") + path;
  result.skipped = loaded.skipped;
  for (auto& line : checkPredictable(result.traced, given)) result.skipped.push_back(std::move(line));
  const auto& [runs, timelines, untraced] = result.traced;
  result.rows = predictRows(runs, replayedRuns(timelines, computeBases(runs, timelines, options)), options);
  result.mismatches = computeMismatches(runs, timelines);
  result.quality = qualityRule(result.rows, options);
  result.recommendations = recommendationLines(result.rows, options.target_cu, result.quality);
  return result;
}

}  // namespace gcrun::performance
