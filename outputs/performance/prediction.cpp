#include "outputs/performance/prediction.h"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "outputs/performance/compute_basis.h"
#include "outputs/performance/sync_prediction.h"
#include "outputs/statistics.h"

namespace gcrun::performance {
namespace {

// A replay of a few traced steps tells no difference below 1%, however alike its steps.
constexpr double kMinNoise = 0.01;

std::string reducerOf(const outputs::RunData& run) {
  const auto found = run.settings.find("reducer.name");
  return found == run.settings.end() ? "" : found->second;
}

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
  const std::optional<outputs::Target>& target;
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

// The run's own measured time per step, where the row is its own configuration (its workers,
// none simulated, its H): the median step, or the mean over the schedule where its steps differ by
// it (a periodic run's local steps and syncs), whose median would be a local step.
void addMeasured(const outputs::RunData& run, const SyncSchedule& schedule, PredictionRow& row) {
  const bool own = row.workers == run.world_size && run.simulated_workers <= 1 &&
                   (!schedule.periodic || row.sync_every == schedule.every);
  if (!own) return;
  row.measured_ms_per_batch = schedule.periodic ? run.mean_time_per_batch_ms : run.time_per_batch_ms;
  if (row.measured_ms_per_batch) row.measured_statistic = schedule.periodic ? "mean" : "median";
}

// Steps to the target are the run's own, at its own H alone.
void addTarget(const outputs::RunData& run, const std::optional<outputs::Target>& target, bool own_h,
               PredictionRow& row) {
  if (!target || !own_h) return;
  if (const auto hit = outputs::reachedAt(run, *target)) {
    row.steps_to_target = hit->step;
    row.predicted_time_to_target_s = hit->step * row.predicted.total_ms / 1000;
    row.measured_time_to_target_s = hit->elapsed_s;
  }
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
  row.configuration = run.name.empty() ? row.run : run.name;
  row.metric = run.metric;
  row.final_value = run.final_value;
  if (timeline.schedule.periodic) row.sync_every = every;
  row.workers = workers;
  row.network = network.name;
  addMeasured(run, timeline.schedule, row);
  const auto predicted = predictWithNoise(timeline, workers, network, context.bases[i], every);
  row.predicted = predicted.step;
  const double profile_ms = context.profiles[i].ms_per_batch;
  row.compute_basis_ms = profile_ms > 0 ? profile_ms : outputs::median(computeMsOfSteps(timeline));
  const auto sync = syncColumns(timeline, workers, network, context.bases[i], every, row.predicted.compute_ms);
  row.mib_per_sync = sync.mib_per_sync;
  row.mib_per_step = sync.mib_per_step;
  row.cu_formula = sync.cu_formula;
  row.overlapped_ms = sync.overlapped_ms;
  compareWith(context, context.baselines.exact, i, network, predicted.noise, row, row.speedup_vs_exact,
              row.break_even_vs_exact);
  compareWith(context, context.baselines.fp16, i, network, predicted.noise, row, row.speedup_vs_fp16,
              row.break_even_vs_fp16);
  addTarget(run, context.target, every == timeline.schedule.every, row);
  return row;
}

}  // namespace

std::vector<PredictionRow> predictRows(const std::vector<outputs::RunData>& runs, const ReplayedRuns& replayed,
                                       const PredictGrid& grid) {
  if (runs.size() != replayed.timelines.size()) throw std::invalid_argument("predictRows: one timeline per run");
  const auto baselines = baselinesOf(runs);
  const RowContext context{runs, replayed.timelines, replayed.left, replayed.bases, baselines, grid.target};
  std::vector<PredictionRow> rows;
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& schedule = replayed.timelines[i].schedule;
    const auto periods =
        schedule.periodic && !grid.sync_every.empty() ? grid.sync_every : std::vector<int64_t>{schedule.every};
    const auto worker_counts = grid.workers.empty() ? std::vector<int>{runs[i].world_size} : grid.workers;
    for (const int64_t every : periods) {
      for (const int workers : worker_counts) {
        for (const auto& network : grid.networks) rows.push_back(predictRow(context, i, every, workers, network));
      }
    }
  }
  return rows;
}

std::vector<PredictionRow> predictRuns(const std::vector<outputs::RunData>& runs,
                                       const std::vector<RunTimeline>& timelines, const PredictOptions& options) {
  if (runs.size() != timelines.size()) throw std::invalid_argument("predictRuns: one timeline per run");
  return predictRows(runs, replayedRuns(timelines, computeBases(runs, timelines, options)), options);
}

}  // namespace gcrun::performance
