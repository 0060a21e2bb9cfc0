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
constexpr double kMinComputeMismatch = 0.1;
// A replay of a few traced steps tells no difference below 1%, however alike its steps.
constexpr double kMinNoise = 0.01;

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

// A run's traced steps by what they sent: a periodic run's steps without a collective are local,
// the others its syncs (local-sgd's warm-up steps, every-step exchanges, are neither); every step of
// any other run is a "local" one here (its median is the step).
struct StepKinds {
  StepsOfAll local, sync;
};
StepKinds kindsOf(StepsOfAll steps, const SyncSchedule& schedule) {
  StepKinds kinds;
  if (!schedule.periodic) {
    kinds.local = std::move(steps);
    return kinds;
  }
  for (auto& programs : steps) {
    if (programs.front()->step <= schedule.warmup) continue;
    (programs.front()->collectives.empty() ? kinds.local : kinds.sync).push_back(std::move(programs));
  }
  return kinds;
}

double bytesSent(const StepProgram& program) {
  double bytes = 0;
  for (const auto& op : program.collectives) bytes += op.bytes;
  return bytes;
}

// The mean bytes one worker sends in a sync step (a step of an every-step run).
double bytesPerSync(const StepKinds& kinds) {
  const auto& syncs = kinds.sync.empty() ? kinds.local : kinds.sync;
  double bytes = 0;
  for (const auto& programs : syncs) bytes += bytesSent(*programs.front()) / syncs.size();
  return bytes;
}

// Each step's forward+backward+optimizer (one worker's, the first) in milliseconds, sorted.
std::vector<double> computeMsOfSteps(const RunTimeline& timeline) {
  std::vector<double> ms;
  for (const auto& programs : kindsOf(commonSteps(timeline), timeline.schedule).local) {
    ms.push_back(computeOnlyUs(*programs.front()) / 1000);
  }
  std::sort(ms.begin(), ms.end());
  return ms;
}

// Half the interquartile range over the median of sorted values; 0 for fewer than two.
double relativeSpread(const std::vector<double>& sorted) {
  if (sorted.size() < 2) return 0;
  const double middle = sorted[sorted.size() / 2];
  const double spread = (sorted[(3 * sorted.size()) / 4] - sorted[sorted.size() / 4]) / 2;
  return middle > 0 ? spread / middle : 0;
}

// The bandwidth the analytic formula divides by: a link's, else what a calibrated all-reduce's
// per-byte cost is per link (its time for large messages over the ring's byte factor).
double bandwidthOf(const network::NetworkProfile& network, int workers) {
  if (network.bandwidth_bytes_per_s > 0) return network.bandwidth_bytes_per_s;
  constexpr double kLarge = 64.0 * (1 << 20);
  const int at = std::max(2, workers);
  const double per_byte = (collectiveSeconds(network, CollectiveKind::all_reduce, kLarge, at) -
                           collectiveSeconds(network, CollectiveKind::all_reduce, 0, at)) /
                          kLarge / costFactors(CollectiveKind::all_reduce, at).bytes;
  return per_byte > 0 ? 1 / per_byte : 0;
}

ComputeScale scaleOf(const RunTimeline& timeline, const ComputeBasis& compute) {
  if (compute.ms_per_batch <= 0) return {};
  const double measured_ms = outputs::median(computeMsOfSteps(timeline));
  if (measured_ms <= 0) return {};
  const double scale = compute.ms_per_batch / measured_ms;
  return {scale, compute.codec_too ? scale : 1};
}

// A run's time per step and the spread of the steps it came from.
struct Predicted {
  StepPrediction step;
  double noise = 0;
};

std::vector<StepPrediction> predictEach(const StepsOfAll& steps, int workers, const network::NetworkProfile& network,
                                        const ComputeScale& scale) {
  std::vector<StepPrediction> predictions;
  for (const auto& programs : steps) predictions.push_back(predictStep(programs, workers, network, scale));
  std::sort(predictions.begin(), predictions.end(),
            [](const StepPrediction& a, const StepPrediction& b) { return a.total_ms < b.total_ms; });
  return predictions;
}

// The median step of a run that exchanges every step, each step ending with its slowest worker.
Predicted medianStep(const StepsOfAll& steps, int workers, const network::NetworkProfile& network,
                     const ComputeScale& scale) {
  const auto each = predictEach(steps, workers, network, scale);
  std::vector<double> totals;
  for (const auto& step : each) totals.push_back(step.total_ms);
  return {each[each.size() / 2], relativeSpread(totals)};
}

// A periodic run's local step. Between syncs each worker goes at its own pace and all meet at the
// sync, so the period is set by the slowest worker's mean local step; each step's slowest worker
// would add up every worker's noise instead.
Predicted slowestMeanLocalStep(const StepsOfAll& local, int workers, const network::NetworkProfile& network,
                               const ComputeScale& scale) {
  const size_t distinct = std::min(local.front().size(), static_cast<size_t>(std::max(workers, 1)));
  Predicted slowest;
  for (size_t w = 0; w < distinct; ++w) {
    StepPrediction mean;
    std::vector<double> totals;
    for (const auto& programs : local) {
      const auto step = predictStep({programs[w]}, workers, network, scale);
      const double share = 1.0 / static_cast<double>(local.size());
      mean.total_ms += share * step.total_ms;
      mean.compute_ms += share * step.compute_ms;
      mean.codec_ms += share * step.codec_ms;
      mean.exposed_comm_ms += share * step.exposed_comm_ms;
      totals.push_back(step.total_ms);
    }
    std::sort(totals.begin(), totals.end());
    if (w == 0 || mean.total_ms > slowest.step.total_ms) slowest = {mean, relativeSpread(totals)};
  }
  return slowest;
}

// Each program's forward, backward and optimizer scaled to take `ms`, its codec kept: runs that
// share a compute profile replay it at every step of every worker, so that steps slowed by load
// during one run do not decide between methods.
RunTimeline computingAlike(const RunTimeline& timeline, double ms) {
  RunTimeline alike = timeline;
  for (auto& worker : alike.workers) {
    for (auto& program : worker) {
      const double own_us = computeOnlyUs(program);
      if (own_us <= 0) continue;
      for (auto& item : program.items) {
        if (item.kind == StepItem::Kind::compute && item.part == StepItem::Part::compute) item.us *= 1000 * ms / own_us;
      }
    }
  }
  return alike;
}

bool sharesCompute(const ComputeBasis& compute) { return compute.ms_per_batch > 0 && !compute.codec_too; }

Predicted predictWithNoise(const RunTimeline& timeline, int workers, const network::NetworkProfile& network,
                           const ComputeBasis& compute, int64_t sync_every) {
  // The spread left is the exchange's own (its codec and waits), the one that tells methods apart.
  if (sharesCompute(compute)) {
    return predictWithNoise(computingAlike(timeline, compute.ms_per_batch), workers, network, {}, sync_every);
  }
  const auto kinds = kindsOf(commonSteps(timeline), timeline.schedule);
  if (kinds.local.empty() || (timeline.schedule.periodic && kinds.sync.empty())) {
    throw std::invalid_argument("predictRun: a periodic run's timeline needs local and sync steps (loadRunTimeline)");
  }
  const auto scale = scaleOf(timeline, compute);
  if (!timeline.schedule.periodic) return medianStep(kinds.local, workers, network, scale);
  auto predicted = slowestMeanLocalStep(kinds.local, workers, network, scale);
  const auto& schedule = timeline.schedule;
  predicted.step = amortisedStep(predicted.step, predictEach(kinds.sync, workers, network, scale),
                                 sync_every > 0 ? sync_every : schedule.every, schedule.fragments);
  return predicted;
}

// streaming-diloco's time per step with its exchanges in the background: the amortised step less
// its exposed communication, plus what the queue of fragment exchanges still exposes.
std::optional<double> overlappedMs(const RunTimeline& timeline, int workers, const network::NetworkProfile& network,
                                   const ComputeBasis& compute, int64_t every) {
  const auto& schedule = timeline.schedule;
  if (schedule.strategy != "streaming-diloco" || !schedule.periodic) return std::nullopt;
  if (sharesCompute(compute))
    return overlappedMs(computingAlike(timeline, compute.ms_per_batch), workers, network, {}, every);
  const auto kinds = kindsOf(commonSteps(timeline), schedule);
  const auto scale = scaleOf(timeline, compute);
  const auto middle = slowestMeanLocalStep(kinds.local, workers, network, scale).step;
  std::vector<double> exchanges;
  for (const auto& programs : kinds.sync) {
    exchanges.push_back(
        std::max(0.0, predictStep(programs, workers, network, scale).exposed_comm_ms - middle.exposed_comm_ms));
  }
  const auto fragments = static_cast<size_t>(std::min(schedule.fragments, every));
  double mean = 0;
  for (const double ms : exchanges) mean += ms / exchanges.size();
  exchanges.resize(fragments, mean);  // a window shorter than a period: the others like the mean
  const auto amortised = predictWithNoise(timeline, workers, network, compute, every).step;
  const double share = static_cast<double>(schedule.fragments) / static_cast<double>(every);
  const double without_waits = amortised.total_ms - share * mean;
  return without_waits + streamingExposedMsPerStep(middle.total_ms, exchanges, every, schedule.delay);
}

// The steps the model needs of a run, for break-even searches that replay it at many bandwidths:
// the median step of a run that exchanges every step (on `network` at `workers`); all of a
// periodic run's, whose local steps send nothing and cost the same at any bandwidth.
RunTimeline representativeSteps(const RunTimeline& timeline, int workers, const network::NetworkProfile& network) {
  if (timeline.schedule.periodic) return timeline;
  const auto steps = commonSteps(timeline);
  std::vector<std::pair<double, size_t>> totals;
  for (size_t k = 0; k < steps.size(); ++k) totals.emplace_back(predictStep(steps[k], workers, network).total_ms, k);
  std::sort(totals.begin(), totals.end());
  RunTimeline kept;
  kept.schedule = timeline.schedule;
  for (const auto* program : steps[totals[totals.size() / 2].second]) kept.workers.push_back({*program});
  return kept;
}

// Where predicted(method) - predicted(baseline) turns from negative to non-negative as the
// bandwidth grows, at the network's latency.
std::optional<double> breakEven(const RunTimeline& method, const RunTimeline& baseline, int workers, double latency_s,
                                const ComputeBasis& method_compute, const ComputeBasis& baseline_compute,
                                int64_t sync_every) {
  const auto gap = [&](double bandwidth) {
    const auto link = network::linkProfile(bandwidth, latency_s);
    return predictRun(method, workers, link, method_compute, sync_every).total_ms -
           predictRun(baseline, workers, link, baseline_compute).total_ms;
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

// A periodic run is predicted from its local steps and its sync steps: its window needs both.
void checkSyncWindow(const StepKinds& kinds, const SyncSchedule& schedule, const std::string& dir) {
  if (!schedule.periodic || (!kinds.local.empty() && !kinds.sync.empty())) return;
  const auto every = std::to_string(schedule.every);
  throw UserError(dir + ": its step timeline holds " + (kinds.sync.empty() ? "no sync step" : "no local step") +
                  " of its " + schedule.strategy + " schedule (sync.every " + every +
                  "); trace a window of more than " + every + " steps, e.g. output.trace=1-" +
                  std::to_string(2 * schedule.every));
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
  timeline.schedule = syncScheduleOf(run);
  checkSyncWindow(kindsOf(steps, timeline.schedule), timeline.schedule, run.dir);
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
                          const ComputeBasis& compute, int64_t sync_every) {
  return predictWithNoise(timeline, workers, network, compute, sync_every).step;
}

std::vector<ComputeBasis> computeBases(const std::vector<outputs::RunData>& runs,
                                       const std::vector<RunTimeline>& timelines, const PredictOptions& options) {
  std::vector<ComputeBasis> bases(runs.size());
  if (options.compute_ms_per_batch > 0) {
    for (auto& basis : bases) basis = {options.compute_ms_per_batch, true};
    return bases;
  }
  if (!options.shared_compute) return bases;
  std::map<std::string, std::vector<double>> own_ms;
  for (size_t i = 0; i < runs.size(); ++i) {
    own_ms[comparisonOf(runs[i])].push_back(outputs::median(computeMsOfSteps(timelines[i])));
  }
  // A run alone in its comparison has none to compute alike with: its own steps stand.
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& group = own_ms[comparisonOf(runs[i])];
    if (group.size() > 1) bases[i] = {outputs::median(group), false};
  }
  return bases;
}

std::vector<std::string> computeMismatches(const std::vector<outputs::RunData>& runs,
                                           const std::vector<RunTimeline>& timelines) {
  struct Own {
    size_t run;
    double ms, spread;
  };
  std::map<std::string, std::vector<Own>> groups;
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto steps = computeMsOfSteps(timelines[i]);
    groups[comparisonOf(runs[i])].push_back({i, outputs::median(steps), relativeSpread(steps)});
  }
  std::vector<std::string> lines;
  for (auto& [comparison, owns] : groups) {
    if (owns.size() < 2) continue;
    const auto [fastest, slowest] =
        std::minmax_element(owns.begin(), owns.end(), [](const Own& a, const Own& b) { return a.ms < b.ms; });
    // Beyond the noise: twice the steps' own spread, and at least 10%.
    const double tolerance = std::max(kMinComputeMismatch, 2 * std::max(fastest->spread, slowest->spread));
    if (fastest->ms <= 0 || slowest->ms / fastest->ms - 1 <= tolerance) continue;
    std::vector<double> all;
    for (const auto& own : owns) all.push_back(own.ms);
    char line[512];
    std::snprintf(line, sizeof line,
                  "%s computed a step in %.1f ms and %s in %.1f ms, though they train the same model on the same "
                  "batch (a busy machine during one?): both are predicted with the median, %.1f ms",
                  baseName(runs[slowest->run].dir).c_str(), slowest->ms, baseName(runs[fastest->run].dir).c_str(),
                  fastest->ms, outputs::median(all));
    lines.push_back(line);
  }
  return lines;
}

namespace {

// The first full- and half-precision run of each comparison: the baselines.
struct Baselines {
  std::map<std::string, size_t> exact, fp16;
};
Baselines baselinesOf(const std::vector<outputs::RunData>& runs) {
  Baselines baselines;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].baseline == Baseline::full_precision) baselines.exact.emplace(comparisonOf(runs[i]), i);
    if (runs[i].baseline == Baseline::half_precision) baselines.fp16.emplace(comparisonOf(runs[i]), i);
  }
  return baselines;
}

// Rows are made run by run: everything one row needs to see of the others.
struct RowContext {
  const std::vector<outputs::RunData>& runs;
  const std::vector<RunTimeline>& timelines;  // with a shared compute profile applied
  const std::vector<ComputeBasis>& bases;     // what is left to apply
  const std::vector<ComputeBasis>& profiles;  // computeBases's, for the rows' compute_basis_ms
  const Baselines& baselines;
  const PredictOptions& options;
};

// The speedup of row (run i) over the comparison's baseline in `baselines`, its break-even
// bandwidth, and the noise that decides whether it is one.
void compareWith(const RowContext& context, const std::map<std::string, size_t>& baselines, size_t i,
                 const network::NetworkProfile& network, double run_noise, PredictionRow& row,
                 std::optional<double>& speedup, std::optional<double>& break_even) {
  const auto found = baselines.find(row.comparison);
  if (found == baselines.end()) return;
  const size_t b = found->second;
  const auto baseline =
      predictWithNoise(context.timelines[b], row.workers, network, context.bases[b], /*sync_every=*/0);
  row.noise = std::max({row.noise, run_noise, baseline.noise, kMinNoise});
  // A step predicted to take no time (a trace of zero durations on a free network) has none.
  if (row.predicted.total_ms > 0) speedup = baseline.step.total_ms / row.predicted.total_ms;
  if (b == i) return;
  const int64_t every = row.sync_every.value_or(0);
  break_even = breakEven(representativeSteps(context.timelines[i], row.workers, network),
                         representativeSteps(context.timelines[b], row.workers, network), row.workers,
                         latencyOf(network, row.workers), context.bases[i], context.bases[b], every);
}

PredictionRow predictRow(const RowContext& context, size_t i, int64_t every, int workers,
                         const network::NetworkProfile& network) {
  const auto& run = context.runs[i];
  const auto& timeline = context.timelines[i];
  PredictionRow row;
  row.run = baseName(run.dir);
  row.dir = run.dir;
  row.reducer = reducerOf(run);
  row.strategy = timeline.schedule.strategy;
  row.comparison = comparisonOf(run);
  if (timeline.schedule.periodic || run.settings.count("sync.every")) row.sync_every = every;
  row.workers = workers;
  row.network = network.name;
  const bool own_h = every == timeline.schedule.every;
  if (workers == run.world_size && run.simulated_workers <= 1 && own_h)
    row.measured_ms_per_batch = run.time_per_batch_ms;
  const auto predicted = predictWithNoise(timeline, workers, network, context.bases[i], every);
  row.predicted = predicted.step;
  const double profile_ms = context.profiles[i].ms_per_batch;
  row.compute_basis_ms = profile_ms > 0 ? profile_ms : outputs::median(computeMsOfSteps(timeline));
  const auto kinds = kindsOf(commonSteps(timeline), timeline.schedule);
  row.mib_per_sync = bytesPerSync(kinds) / (1 << 20);
  const double syncs_per_step =
      timeline.schedule.periodic ? static_cast<double>(timeline.schedule.fragments) / static_cast<double>(every) : 1;
  row.mib_per_step = row.mib_per_sync * syncs_per_step;
  const double bandwidth = bandwidthOf(network, workers);
  if (bandwidth > 0 && workers > 1) {
    row.cu_formula =
        formulaCu(row.predicted.compute_ms, timeline.schedule.periodic ? every : 1,
                  bytesPerSync(kinds) * (timeline.schedule.periodic ? timeline.schedule.fragments : 1), bandwidth);
  }
  row.overlapped_ms = overlappedMs(timeline, workers, network, context.bases[i], every);
  compareWith(context, context.baselines.exact, i, network, predicted.noise, row, row.speedup_vs_exact,
              row.break_even_vs_exact);
  compareWith(context, context.baselines.fp16, i, network, predicted.noise, row, row.speedup_vs_fp16,
              row.break_even_vs_fp16);
  // Steps to a target are the run's own, at its own H alone.
  if (context.options.target && own_h) {
    if (const auto hit = outputs::reachedAt(run, *context.options.target)) {
      row.steps_to_target = hit->step;
      row.predicted_time_to_target_s = hit->step * row.predicted.total_ms / 1000;
      row.measured_time_to_target_s = hit->elapsed_s;
    }
  }
  return row;
}

}  // namespace

std::vector<PredictionRow> predictRuns(const std::vector<outputs::RunData>& runs,
                                       const std::vector<RunTimeline>& timelines, const PredictOptions& options) {
  if (runs.size() != timelines.size()) throw std::invalid_argument("predictRuns: one timeline per run");
  // A shared compute profile applied once, not in every prediction of the rows and their
  // break-even searches (each would copy the timeline again).
  const auto bases = computeBases(runs, timelines, options);
  std::vector<RunTimeline> replayed;
  std::vector<ComputeBasis> left;  // what the predictions still apply: --compute-ms-per-batch
  for (size_t i = 0; i < runs.size(); ++i) {
    const bool shared = sharesCompute(bases[i]);
    replayed.push_back(shared ? computingAlike(timelines[i], bases[i].ms_per_batch) : timelines[i]);
    left.push_back(shared ? ComputeBasis{} : bases[i]);
  }
  const auto baselines = baselinesOf(runs);
  const RowContext context{runs, replayed, left, bases, baselines, options};
  std::vector<PredictionRow> rows;
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& schedule = replayed[i].schedule;
    const auto periods =
        schedule.periodic && !options.sync_every.empty() ? options.sync_every : std::vector<int64_t>{schedule.every};
    const auto worker_counts = options.workers.empty() ? std::vector<int>{runs[i].world_size} : options.workers;
    for (const int64_t every : periods) {
      for (const int workers : worker_counts) {
        for (const auto& network : options.networks) rows.push_back(predictRow(context, i, every, workers, network));
      }
    }
  }
  return rows;
}

int64_t parseSyncEvery(const std::string& text, const std::string& what) {
  const auto value = parseWholeNumber(text);
  if (!value || *value < 1 || *value > kMaxSyncEvery) {
    throw UserError(what + ": '" + clipForMessage(text, 60) +
                    "' is not a sync period; expected a whole number of steps from 1 to " +
                    std::to_string(kMaxSyncEvery));
  }
  return *value;
}

double parseTargetCu(const std::string& text, const std::string& what) {
  const auto value = parseDecimal(text);
  if (!value || !(*value > 0) || *value > 1) {
    throw UserError(what + ": '" + clipForMessage(text, 60) +
                    "' is not a compute utilisation; expected a share above 0 up to 1, e.g. 0.9");
  }
  return *value;
}

bool parseComputeProfile(const std::string& text, const std::string& what) {
  if (text == "shared" || text == "own") return text == "shared";
  throw UserError(what + ": '" + clipForMessage(text, 60) + "' is not a compute profile; expected shared or own");
}

std::string speedupText(const std::optional<double>& speedup, double noise) {
  if (!speedup) return "";
  if (std::abs(*speedup - 1) <= noise) return "no difference";
  char text[32];
  std::snprintf(text, sizeof text, "%.2fx", *speedup);
  return text;
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
