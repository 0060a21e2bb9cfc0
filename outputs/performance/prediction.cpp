#include "outputs/performance/prediction.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <regex>
#include <stdexcept>

#include "hyperparams/base/errors.h"
#include "outputs/files/safe_files.h"
#include "outputs/performance/collective_cost.h"
#include "outputs/statistics.h"
#include "outputs/trace/trace_file.h"

namespace gcrun::performance {
namespace {

constexpr double kMinSearchBandwidth = 1e6 / 8;   // 1 Mbit/s
constexpr double kMaxSearchBandwidth = 1e13 / 8;  // 10 Tbit/s

std::string reducerOf(const outputs::RunData& run) {
  const auto found = run.settings.find("reducer.name");
  return found == run.settings.end() ? "" : found->second;
}

// Runs are compared when they train the same thing the same way, whatever their reducer.
std::string comparisonOf(const outputs::RunData& run) {
  std::string key;
  for (const auto& [name, value] : run.settings) {
    if (name.rfind("task.", 0) == 0 || name == "training.batch_size") key += name + "=" + value + "\n";
  }
  return key;
}

std::string baseName(const std::string& dir) {
  std::string trimmed = dir;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  const auto slash = trimmed.rfind('/');
  return slash == std::string::npos ? trimmed : trimmed.substr(slash + 1);
}

// The steps every worker traced, each as one program per worker.
std::vector<std::vector<const StepProgram*>> commonSteps(const RunTimeline& timeline) {
  std::map<int64_t, std::vector<const StepProgram*>> by_step;
  for (const auto& worker : timeline.workers) {
    for (const auto& program : worker) by_step[program.step].push_back(&program);
  }
  std::vector<std::vector<const StepProgram*>> steps;
  for (auto& [step, programs] : by_step) {
    if (programs.size() == timeline.workers.size()) steps.push_back(std::move(programs));
  }
  return steps;
}

double computeOnlyUs(const StepProgram& program) {
  double total = 0;
  for (const auto& item : program.items) {
    if (item.kind == StepItem::Kind::compute && item.part == StepItem::Part::compute) total += item.us;
  }
  return total;
}

double mibPerStep(const RunTimeline& timeline) {
  const auto steps = commonSteps(timeline);
  if (steps.empty()) return 0;
  double bytes = 0;
  for (const auto& op : steps.front().front()->collectives) bytes += op.bytes;
  return bytes / (1 << 20);
}

// The run's median step alone (by its time on `network` at `workers`): break-even searches
// replay it at many bandwidths.
RunTimeline medianStepOf(const RunTimeline& timeline, int workers, const network::NetworkProfile& network) {
  auto steps = commonSteps(timeline);
  std::vector<std::pair<double, size_t>> totals;
  for (size_t k = 0; k < steps.size(); ++k) totals.emplace_back(predictStep(steps[k], workers, network).total_ms, k);
  std::sort(totals.begin(), totals.end());
  RunTimeline one;
  for (const auto* program : steps[totals[totals.size() / 2].second]) one.workers.push_back({*program});
  return one;
}

// Where predicted(method) - predicted(baseline) turns from negative to non-negative as the
// bandwidth grows, at the network's latency.
std::optional<double> breakEven(const RunTimeline& method, const RunTimeline& baseline, int workers, double latency_s,
                                double compute_ms) {
  const auto gap = [&](double bandwidth) {
    const auto link = network::linkProfile(bandwidth, latency_s);
    return predictRun(method, workers, link, compute_ms).total_ms -
           predictRun(baseline, workers, link, compute_ms).total_ms;
  };
  constexpr int kPerDecade = 8;
  const int points = static_cast<int>(std::log10(kMaxSearchBandwidth / kMinSearchBandwidth)) * kPerDecade;
  std::optional<double> last_faster;
  double previous = kMinSearchBandwidth;
  for (int k = 0; k <= points; ++k) {
    const double bandwidth = kMinSearchBandwidth * std::pow(10.0, double(k) / kPerDecade);
    if (gap(bandwidth) < 0) {
      last_faster = bandwidth;
    } else if (last_faster && *last_faster == previous) {
      double low = previous, high = bandwidth;  // faster at low, not at high
      for (int i = 0; i < 30; ++i) {
        const double middle = std::sqrt(low * high);
        (gap(middle) < 0 ? low : high) = middle;
      }
      return low;
    }
    previous = bandwidth;
  }
  if (!last_faster) return 0.0;
  return std::numeric_limits<double>::infinity();
}

}  // namespace

RunTimeline loadRunTimeline(const std::string& dir) {
  static const std::regex trace_name("trace-rank[0-9]+\\.json");
  RunTimeline timeline;
  std::map<int, trace::WorkerTimeline> workers;
  size_t files = 0;
  bool summable = false;
  for (const auto& name : files::Directory::open(dir, false).entries()) {
    if (!std::regex_match(name, trace_name)) continue;
    ++files;
    auto process = trace::readTraceFile(dir + "/" + name);
    timeline.truncated |= process.truncated;
    summable |= process.summable;
    for (auto& worker : process.workers) workers[worker.worker] = std::move(worker);
  }
  if (files == 0 || workers.empty()) {
    throw UserError(dir + ": no step timeline (trace-rank<r>.json); run it with --set output.trace=A-B, e.g. 5-15");
  }
  // A simulated worker's own time between the spans is spent waiting for its turn.
  const bool simulated = workers.size() > files;
  // Simulated workers share one update, which the first applies while the others wait for it.
  const auto optimizer_times = optimizerTimes(workers.begin()->second);
  for (const auto& [rank, worker] : workers) {
    auto programs = stepPrograms(worker, !simulated, summable, simulated ? &optimizer_times : nullptr);
    if (!programs.empty()) timeline.workers.push_back(std::move(programs));
  }
  if (timeline.workers.empty() || commonSteps(timeline).empty()) {
    throw UserError(dir + ": its step timeline holds no complete step (forward, backward and reduce on every worker)");
  }
  return timeline;
}

StepPrediction predictRun(const RunTimeline& timeline, int workers, const network::NetworkProfile& network,
                          double compute_ms_per_batch) {
  const auto steps = commonSteps(timeline);
  double scale = 1;
  if (compute_ms_per_batch > 0) {
    std::vector<double> measured;
    for (const auto& programs : steps) measured.push_back(computeOnlyUs(*programs.front()));
    const double measured_us = outputs::median(measured);
    if (measured_us > 0) scale = 1000 * compute_ms_per_batch / measured_us;
  }
  std::vector<StepPrediction> predictions;
  for (const auto& programs : steps) predictions.push_back(predictStep(programs, workers, network, scale));
  std::sort(predictions.begin(), predictions.end(),
            [](const StepPrediction& a, const StepPrediction& b) { return a.total_ms < b.total_ms; });
  return predictions[predictions.size() / 2];
}

std::vector<PredictionRow> predictRuns(const std::vector<outputs::RunData>& runs,
                                       const std::vector<RunTimeline>& timelines, const PredictOptions& options) {
  if (runs.size() != timelines.size()) throw std::invalid_argument("predictRuns: one timeline per run");
  // The first exact and fp16 run of each comparison: the baselines.
  std::map<std::string, size_t> exact, fp16;
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto reducer = reducerOf(runs[i]);
    if (reducer == "exact") exact.emplace(comparisonOf(runs[i]), i);
    if (reducer == "fp16") fp16.emplace(comparisonOf(runs[i]), i);
  }
  std::vector<PredictionRow> rows;
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& run = runs[i];
    const auto comparison = comparisonOf(run);
    const auto worker_counts = options.workers.empty() ? std::vector<int>{run.world_size} : options.workers;
    for (const int workers : worker_counts) {
      for (const auto& network : options.networks) {
        PredictionRow row;
        row.run = baseName(run.dir);
        row.dir = run.dir;
        row.reducer = reducerOf(run);
        row.comparison = comparison;
        row.workers = workers;
        row.network = network.name;
        if (workers == run.world_size && run.simulated_workers <= 1) row.measured_ms_per_batch = run.time_per_batch_ms;
        row.predicted = predictRun(timelines[i], workers, network, options.compute_ms_per_batch);
        row.mib_per_step = mibPerStep(timelines[i]);
        const double latency = latencyOf(network, workers);
        const auto against = [&](const std::map<std::string, size_t>& baselines, std::optional<double>& speedup,
                                 std::optional<double>& break_even) {
          const auto found = baselines.find(comparison);
          if (found == baselines.end()) return;
          const auto& baseline = timelines[found->second];
          speedup =
              predictRun(baseline, workers, network, options.compute_ms_per_batch).total_ms / row.predicted.total_ms;
          if (found->second != i) {
            break_even =
                breakEven(medianStepOf(timelines[i], workers, network), medianStepOf(baseline, workers, network),
                          workers, latency, options.compute_ms_per_batch);
          }
        };
        against(exact, row.speedup_vs_exact, row.break_even_vs_exact);
        against(fp16, row.speedup_vs_fp16, row.break_even_vs_fp16);
        if (options.target) {
          if (const auto hit = outputs::reachedAt(run, *options.target)) {
            row.steps_to_target = hit->step;
            row.predicted_time_to_target_s = hit->step * row.predicted.total_ms / 1000;
            row.measured_time_to_target_s = hit->elapsed_s;
          }
        }
        rows.push_back(std::move(row));
      }
    }
  }
  return rows;
}

std::string breakEvenText(const std::optional<double>& bytes_per_s) {
  if (!bytes_per_s) return "";
  if (*bytes_per_s <= 0) return "never";
  if (std::isinf(*bytes_per_s)) return "always";
  const double bits = 8 * *bytes_per_s;
  const char* unit = bits >= 1e12 ? "Tbit/s" : bits >= 1e9 ? "Gbit/s" : "Mbit/s";
  const double scaled = bits / (bits >= 1e12 ? 1e12 : bits >= 1e9 ? 1e9 : 1e6);
  char text[48];
  std::snprintf(text, sizeof text, "below %.3g %s", scaled, unit);
  return text;
}

}  // namespace gcrun::performance
