#include "outputs/performance/sync_cost.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <stdexcept>

#include "hyperparams/base/decimal.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"
#include "outputs/performance/prediction.h"
#include "outputs/run_directory.h"

namespace gcrun::performance {
namespace {

// The strategies whose schedules predict knows, as gcrun's registry names them.
const std::vector<std::string> kKnownStrategies = {"every-step",       "local-sgd",  "diloco",
                                                   "streaming-diloco", "sparseloco", "demo"};

std::string configFileOf(const outputs::RunData& run) { return run.dir + "/" + outputs::run_files::kConfig; }

// Setting `key` of the run's config.yaml, a file from elsewhere like the rest of a run directory: a
// whole number from `min` to `max`, or `fallback` when the file has none; a UserError naming the
// file and key otherwise.
int64_t settingOr(const outputs::RunData& run, const std::string& key, int64_t fallback, int64_t min, int64_t max) {
  const auto found = run.settings.find(key);
  if (found == run.settings.end()) return fallback;
  const auto value = parseWholeNumber(found->second);
  if (!value || *value < min || *value > max) {
    throw UserError(configFileOf(run) + ": " + key + " is '" + clipForMessage(found->second, 60) +
                    "'; expected a whole number from " + std::to_string(min) + " to " + std::to_string(max));
  }
  return *value;
}

std::string strategyOf(const outputs::RunData& run) {
  const auto found = run.settings.find("sync.strategy");
  if (found == run.settings.end()) return "every-step";
  if (std::find(kKnownStrategies.begin(), kKnownStrategies.end(), found->second) == kKnownStrategies.end()) {
    std::string known;
    for (const auto& name : kKnownStrategies) known += (known.empty() ? "" : ", ") + name;
    throw UserError(configFileOf(run) + ": sync.strategy '" + clipForMessage(found->second, 60) +
                    "' is not a strategy whose schedule predict knows; expected one of " + known);
  }
  return found->second;
}

// The step (1 to H) of each fragment's send within a period, as streaming-diloco schedules them:
// fragment p after the steps t with t mod H = ((p+1)H/F) mod H.
std::vector<int64_t> sendSteps(int64_t every, size_t fragments) {
  std::vector<int64_t> steps;
  const auto f = static_cast<int64_t>(fragments);
  for (int64_t p = 0; p < f; ++p) {
    const int64_t at = ((p + 1) * every / f) % every;
    steps.push_back(at == 0 ? every : at);
  }
  return steps;
}

}  // namespace

SyncSchedule syncScheduleOf(const outputs::RunData& run) {
  SyncSchedule schedule;
  schedule.strategy = strategyOf(run);
  schedule.every = settingOr(run, "sync.every", 1, 1, kMaxSyncEvery);
  schedule.periodic = run.settings.count("sync.every") > 0;
  schedule.fragments = settingOr(run, "sync.fragments", 1, 1, schedule.every);
  schedule.delay = settingOr(run, "sync.delay", 0, 0, schedule.every);
  schedule.warmup = settingOr(run, "sync.warmup_steps", 0, 0, std::numeric_limits<int64_t>::max());
  return schedule;
}

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
