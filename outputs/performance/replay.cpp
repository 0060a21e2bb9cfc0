#include "outputs/performance/replay.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "outputs/performance/compute_basis.h"
#include "outputs/performance/sync_cost.h"
#include "outputs/statistics.h"

namespace gcrun::performance {
namespace {

constexpr double kMinSearchBandwidth = 1e6 / 8;   // 1 Mbit/s
constexpr double kMaxSearchBandwidth = 1e13 / 8;  // 10 Tbit/s

std::vector<StepPrediction> predictEach(const StepsOfAll& steps, int workers, const network::NetworkProfile& network,
                                        const ComputeScale& scale) {
  auto predictions = replaySteps(steps, workers, network, scale);
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

// Whether a traced exchange of the run ran in the background (CollectiveOp::background).
bool ranInBackground(const StepsOfAll& syncs) {
  for (const auto& programs : syncs) {
    for (const auto& op : programs.front()->collectives) {
      if (op.background) return true;
    }
  }
  return false;
}

}  // namespace

StepPrediction overlappedStep(const StepPrediction& local, const std::vector<StepPrediction>& syncs,
                              StepPrediction amortised, int64_t every, const SyncSchedule& schedule) {
  std::vector<double> exchanges;
  double mean = 0;
  for (const auto& sync : syncs) {
    exchanges.push_back(std::max(0.0, sync.exposed_comm_ms - local.exposed_comm_ms));
    mean += exchanges.back() / static_cast<double>(syncs.size());
  }
  // A window shorter than a period: the fragments it did not trace cost the mean.
  exchanges.resize(static_cast<size_t>(std::min(schedule.fragments, every)), mean);
  const double share = static_cast<double>(schedule.fragments) / static_cast<double>(every);
  const double exposed = streamingExposedMsPerStep(local.total_ms, exchanges, every, schedule.delay);
  amortised.total_ms += exposed - share * mean;
  amortised.exposed_comm_ms = std::max(0.0, amortised.exposed_comm_ms + exposed - share * mean);
  return amortised;
}

std::vector<StepPrediction> replaySteps(const StepsOfAll& steps, int workers, const network::NetworkProfile& network,
                                        const ComputeScale& scale) {
  std::vector<StepPrediction> predictions;
  for (const auto& programs : steps) predictions.push_back(predictStep(programs, workers, network, scale));
  return predictions;
}

Predicted slowestMeanLocalStep(const StepsOfAll& local, int workers, const network::NetworkProfile& network,
                               const ComputeScale& scale) {
  const size_t distinct = std::min(local.front().size(), static_cast<size_t>(std::max(workers, 1)));
  Predicted slowest;
  for (size_t w = 0; w < distinct; ++w) {
    StepsOfAll alone;  // worker w's own steps: it goes at its own pace between syncs
    for (const auto& programs : local) alone.push_back({programs[w]});
    StepPrediction mean;
    std::vector<double> totals;
    for (const auto& step : replaySteps(alone, workers, network, scale)) {
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

Predicted predictWithNoise(const RunTimeline& timeline, int workers, const network::NetworkProfile& network,
                           const ComputeBasis& compute, int64_t sync_every, SyncCosting costing) {
  // Under a shared profile the spread left is the exchange's own (its codec and waits), the one
  // that tells methods apart.
  const auto replay = computeReplay(timeline, compute);
  const auto& replayed = replay.of(timeline);
  const auto& schedule = replayed.schedule;
  const auto kinds = kindsOf(commonSteps(replayed), schedule);
  if (kinds.local.empty() || (schedule.periodic && kinds.sync.empty())) {
    throw std::invalid_argument("predictRun: a periodic run's timeline needs local and sync steps (loadRunTimeline)");
  }
  if (!schedule.periodic) return medianStep(kinds.local, workers, network, replay.scale);
  auto predicted = slowestMeanLocalStep(kinds.local, workers, network, replay.scale);
  const int64_t every = sync_every > 0 ? sync_every : schedule.every;
  const auto amortised =
      amortisedStep(predicted.step, predictEach(kinds.sync, workers, network, replay.scale), every, schedule.fragments);
  const bool overlaps =
      schedule.overlapped && schedule.delay > 0 && (costing == SyncCosting::overlapped || ranInBackground(kinds.sync));
  // The exchanges in their order of sending: the queue on the link follows it.
  predicted.step = overlaps ? overlappedStep(predicted.step, replaySteps(kinds.sync, workers, network, replay.scale),
                                             amortised, every, schedule)
                            : amortised;
  return predicted;
}

StepPrediction predictRun(const RunTimeline& timeline, int workers, const network::NetworkProfile& network,
                          const ComputeBasis& compute, int64_t sync_every) {
  return predictWithNoise(timeline, workers, network, compute, sync_every).step;
}

RunTimeline representativeSteps(const RunTimeline& timeline, int workers, const network::NetworkProfile& network) {
  if (timeline.schedule.periodic) return timeline;
  const auto steps = commonSteps(timeline);
  const auto each = replaySteps(steps, workers, network, {});
  std::vector<std::pair<double, size_t>> totals;
  for (size_t k = 0; k < steps.size(); ++k) totals.emplace_back(each[k].total_ms, k);
  std::sort(totals.begin(), totals.end());
  RunTimeline kept;
  kept.schedule = timeline.schedule;
  for (const auto* program : steps[totals[totals.size() / 2].second]) kept.workers.push_back({*program});
  return kept;
}

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

}  // namespace gcrun::performance
