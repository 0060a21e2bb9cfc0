#include "outputs/performance/sync_prediction.h"

#include <algorithm>
#include <vector>

#include "outputs/performance/collective_cost.h"
#include "outputs/performance/compute_basis.h"
#include "outputs/performance/replay.h"
#include "outputs/performance/sync_cost.h"

namespace gcrun::performance {
namespace {

double bytesSent(const StepProgram& program) {
  double bytes = 0;
  for (const auto& op : program.collectives) bytes += op.bytes;
  return bytes;
}

// The mean bytes one worker sends in a sync step (a step of a run that exchanges every step).
double bytesPerSync(const StepKinds& kinds) {
  const auto& syncs = kinds.sync.empty() ? kinds.local : kinds.sync;
  double bytes = 0;
  for (const auto& programs : syncs) bytes += bytesSent(*programs.front()) / syncs.size();
  return bytes;
}

// The time per step of a schedule that may overlap its sends, with its exchanges in the background
// (replay.h's SyncCosting::overlapped), whether or not the run's own did.
std::optional<double> overlappedMs(const RunTimeline& timeline, int workers, const network::NetworkProfile& network,
                                   const ComputeBasis& compute, int64_t every) {
  if (!timeline.schedule.overlapped || !timeline.schedule.periodic) return std::nullopt;
  return predictWithNoise(timeline, workers, network, compute, every, SyncCosting::overlapped).step.total_ms;
}

}  // namespace

SyncColumns syncColumns(const RunTimeline& timeline, int workers, const network::NetworkProfile& network,
                        const ComputeBasis& compute, int64_t every, double compute_ms) {
  const auto& schedule = timeline.schedule;
  const auto kinds = kindsOf(commonSteps(timeline), schedule);
  SyncColumns columns;
  columns.mib_per_sync = bytesPerSync(kinds) / (1 << 20);
  const double syncs_per_step =
      schedule.periodic ? static_cast<double>(schedule.fragments) / static_cast<double>(every) : 1;
  columns.mib_per_step = columns.mib_per_sync * syncs_per_step;
  columns.overlapped_ms = overlappedMs(timeline, workers, network, compute, every);
  const double bandwidth = bandwidthOf(network, workers);
  if (bandwidth > 0 && workers > 1) {
    columns.cu_formula = formulaCu(compute_ms, schedule.periodic ? every : 1,
                                   bytesPerSync(kinds) * (schedule.periodic ? schedule.fragments : 1), bandwidth);
  }
  return columns;
}

}  // namespace gcrun::performance
