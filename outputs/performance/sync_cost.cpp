#include "outputs/performance/sync_cost.h"

#include <algorithm>
#include <deque>
#include <stdexcept>

#include "hyperparams/base/sync_schedule.h"

namespace gcrun::performance {
namespace {

// The step (1 to H) of each fragment's send within a period (sendOffset, 0 being the period's end).
std::vector<int64_t> sendSteps(int64_t every, size_t fragments) {
  std::vector<int64_t> steps;
  const auto f = static_cast<int64_t>(fragments);
  for (int64_t p = 0; p < f; ++p) {
    const int64_t at = sendOffset(p, f, every);
    steps.push_back(at == 0 ? every : at);
  }
  return steps;
}

}  // namespace

StepPrediction amortisedStep(const StepPrediction& local, const std::vector<StepPrediction>& syncs, int64_t every,
                             int64_t fragments) {
  if (syncs.empty() || every < 1 || fragments < 1) throw std::invalid_argument("amortisedStep: no sync steps");
  StepPrediction sync;
  for (const auto& s : syncs) {
    sync.total_ms += s.total_ms / syncs.size();
    sync.compute_ms += s.compute_ms / syncs.size();
    sync.codec_ms += s.codec_ms / syncs.size();
    sync.exposed_comm_ms += s.exposed_comm_ms / syncs.size();
  }
  const double share = static_cast<double>(fragments) / static_cast<double>(every);
  const auto spread = [&](double local_part, double sync_part) {
    return local_part + share * (sync_part - local_part);
  };
  StepPrediction step;
  step.total_ms = spread(local.total_ms, sync.total_ms);
  step.compute_ms = spread(local.compute_ms, sync.compute_ms);
  step.codec_ms = spread(local.codec_ms, sync.codec_ms);
  step.exposed_comm_ms = spread(local.exposed_comm_ms, sync.exposed_comm_ms);
  return step;
}

double streamingExposedMsPerStep(double step_ms, const std::vector<double>& exchange_ms, int64_t every, int64_t delay) {
  if (exchange_ms.empty() || every < static_cast<int64_t>(exchange_ms.size())) {
    throw std::invalid_argument("streamingExposedMsPerStep: one to H fragments");
  }
  const auto sends = sendSteps(every, exchange_ms.size());
  struct Pending {
    int64_t apply_step;
    double done_ms;
  };
  std::deque<Pending> pending;
  double clock = 0, network_free = 0, period_start = 0;
  // Periods until the queue reaches its steady state; the last one is measured.
  const int64_t periods = 4 + delay + static_cast<int64_t>(exchange_ms.size());
  for (int64_t period = 0; period < periods; ++period) {
    period_start = clock;
    for (int64_t k = 1; k <= every; ++k) {
      const int64_t step = period * every + k;
      clock += step_ms;
      for (size_t f = 0; f < sends.size(); ++f) {
        if (sends[f] != k) continue;
        network_free = std::max(clock, network_free) + exchange_ms[f];
        pending.push_back({step + delay, network_free});
      }
      while (!pending.empty() && pending.front().apply_step <= step) {
        clock = std::max(clock, pending.front().done_ms);
        pending.pop_front();
      }
    }
  }
  return std::max(0.0, (clock - period_start) / static_cast<double>(every) - step_ms);
}

double formulaCu(double compute_ms, int64_t every, double bytes, double bandwidth_bytes_per_s) {
  const double computing = static_cast<double>(every) * compute_ms / 1000;
  const double sending = bandwidth_bytes_per_s > 0 ? bytes / bandwidth_bytes_per_s : 0;
  return computing + sending > 0 ? computing / (computing + sending) : 1;
}

}  // namespace gcrun::performance
