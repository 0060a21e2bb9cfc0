#include "outputs/performance/prediction.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <regex>
#include <stdexcept>

#include "hyperparams/base/decimal.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"
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

// The steps every worker traced, each as one program per worker (in the timeline's order).
using StepsOfAll = std::vector<std::vector<const StepProgram*>>;
StepsOfAll commonSteps(const RunTimeline& timeline) {
  std::map<int64_t, std::vector<const StepProgram*>> by_step;
  for (const auto& worker : timeline.workers) {
    for (const auto& program : worker) by_step[program.step].push_back(&program);
  }
  StepsOfAll steps;
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

// Every trace-rank<r>.json in a run directory, its workers by global rank.
struct TracedWorkers {
  std::map<int, trace::WorkerTimeline> workers;
  std::map<int, std::string> file_of;  // each worker's trace file, for messages
  size_t files = 0;
  bool summable = false;
  bool truncated = false;
};

TracedWorkers readTraces(const std::string& dir) {
  static const std::regex trace_name("trace-rank[0-9]+\\.json");
  TracedWorkers traced;
  for (const auto& name : files::Directory::open(dir, false).entries()) {
    if (!std::regex_match(name, trace_name)) continue;
    ++traced.files;
    const auto path = dir + "/" + name;
    auto process = trace::readTraceFile(path);
    traced.truncated |= process.truncated;
    traced.summable |= process.summable;
    for (auto& worker : process.workers) {
      traced.file_of[worker.worker] = path;
      traced.workers[worker.worker] = std::move(worker);
    }
  }
  return traced;
}

// The model replays one step's collectives on every worker: traces whose workers disagree are bad
// data, named by the file of the first worker that differs (`files`: each program's).
void checkSameCollectives(const StepsOfAll& steps, const std::vector<std::string>& files) {
  for (const auto& programs : steps) {
    for (size_t w = 1; w < programs.size(); ++w) {
      if (sameCollectives(*programs[w], *programs[0])) continue;
      throw UserError(files[w] + ": step " + std::to_string(programs[w]->step) +
                      ": its collectives differ from those of the same step in " + files[0] +
                      "; every worker's trace of a step holds the same ones");
    }
  }
}

}  // namespace

RunTimeline loadRunTimeline(const outputs::RunData& run) {
  if (run.world_size < 1 || run.world_size > network::kMaxWorkers) {
    throw UserError(run.dir + "/run.json: world_size " + std::to_string(run.world_size) +
                    " is not a worker count; expected 1 to " + std::to_string(network::kMaxWorkers));
  }
  const auto traced = readTraces(run.dir);
  if (traced.files == 0 || traced.workers.empty()) {
    throw UserError(run.dir + ": no step timeline (trace-rank<r>.json); run it with --set output.trace=A-B, e.g. 5-15");
  }
  RunTimeline timeline;
  timeline.truncated = traced.truncated;
  // A simulated worker's own time between the spans is spent waiting for its turn.
  const bool simulated = traced.workers.size() > traced.files;
  // Simulated workers share one update, which the first applies while the others wait for it.
  const auto optimizer_times = optimizerTimes(traced.workers.begin()->second);
  std::vector<std::string> files;  // of timeline.workers
  for (const auto& [rank, worker] : traced.workers) {
    auto programs = stepPrograms(worker, !simulated, traced.summable, simulated ? &optimizer_times : nullptr);
    if (programs.empty()) continue;
    timeline.workers.push_back(std::move(programs));
    files.push_back(traced.file_of.at(rank));
  }
  const auto steps = commonSteps(timeline);
  if (steps.empty()) {
    throw UserError(run.dir +
                    ": its step timeline holds no complete step (forward, backward and reduce on every worker)");
  }
  checkSameCollectives(steps, files);
  return timeline;
}

TracedRuns traceRuns(std::vector<outputs::RunData> runs) {
  TracedRuns traced;
  for (auto& run : runs) {
    try {
      traced.timelines.push_back(loadRunTimeline(run));
      traced.runs.push_back(std::move(run));
    } catch (const UserError& e) {
      traced.untraced.push_back({std::move(run), e.what()});
    }
  }
  return traced;
}

double parseComputeMsPerBatch(const std::string& text, const std::string& what) {
  const auto value = parseDecimal(text);
  if (!value || !(*value > 0) || *value > kMaxComputeMsPerBatch) {
    throw UserError(what + ": '" + clipForMessage(text, 60) +
                    "' is not a compute time per batch; expected milliseconds above 0 up to 1000000");
  }
  return *value;
}

int parseWorkerCount(const std::string& text, const std::string& what) {
  const auto value = parseWholeNumber(text);
  if (!value || *value < 1 || *value > network::kMaxWorkers) {
    throw UserError(what + ": '" + clipForMessage(text, 60) +
                    "' is not a worker count; expected a whole number from 1 to " +
                    std::to_string(network::kMaxWorkers));
  }
  return static_cast<int>(*value);
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
  // The first full- and half-precision run of each comparison: the baselines.
  std::map<std::string, size_t> exact, fp16;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].baseline == Baseline::full_precision) exact.emplace(comparisonOf(runs[i]), i);
    if (runs[i].baseline == Baseline::half_precision) fp16.emplace(comparisonOf(runs[i]), i);
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
          // A step predicted to take no time (a trace of zero durations on a free network) has none.
          if (row.predicted.total_ms > 0) {
            speedup =
                predictRun(baseline, workers, network, options.compute_ms_per_batch).total_ms / row.predicted.total_ms;
          }
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
