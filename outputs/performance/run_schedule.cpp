#include "outputs/performance/run_schedule.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "hyperparams/base/decimal.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"
#include "outputs/run_directory.h"

namespace gcrun::performance {
namespace {

// The strategies whose schedules the fallback knows, as gcrun's registry named them before
// schedules were recorded.
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

}  // namespace

SyncSchedule syncScheduleOf(const outputs::RunData& run) {
  if (!run.schedule_problem.empty()) {
    throw UserError(run.dir + "/" + outputs::run_files::kInfo + ": " + run.schedule_problem);
  }
  return run.schedule ? *run.schedule : scheduleOfAnOldRun(run);
}

SyncSchedule scheduleOfAnOldRun(const outputs::RunData& run) {
  SyncSchedule schedule;
  schedule.strategy = strategyOf(run);
  schedule.every = settingOr(run, "sync.every", 1, 1, kMaxSyncEvery);
  schedule.periodic = run.settings.count("sync.every") > 0;
  schedule.fragments = settingOr(run, "sync.fragments", 1, 1, schedule.every);
  schedule.delay = settingOr(run, "sync.delay", 0, 0, schedule.every);
  schedule.overlapped = schedule.strategy == "streaming-diloco";
  schedule.warmup_steps = settingOr(run, "sync.warmup_steps", 0, 0, std::numeric_limits<int64_t>::max());
  return schedule;
}

}  // namespace gcrun::performance
