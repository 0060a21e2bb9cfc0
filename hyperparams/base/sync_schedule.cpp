#include "hyperparams/base/sync_schedule.h"

#include <limits>

namespace gcrun {
namespace {

// A strategy's name as the registry spells them: short, lower-case words with '-' or '_'.
constexpr size_t kMaxStrategyName = 64;

bool isStrategyName(const std::string& name) {
  if (name.empty() || name.size() > kMaxStrategyName) return false;
  for (const char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_')) return false;
  }
  return true;
}

std::string outside(const char* field, int64_t value, int64_t min, int64_t max) {
  return std::string(field) + " is " + std::to_string(value) + "; expected a whole number from " + std::to_string(min) +
         " to " + std::to_string(max);
}

}  // namespace

bool SyncSchedule::operator==(const SyncSchedule& other) const {
  return strategy == other.strategy && periodic == other.periodic && every == other.every &&
         fragments == other.fragments && delay == other.delay && overlapped == other.overlapped &&
         warmup_steps == other.warmup_steps;
}

SyncSchedule everyStepSchedule(const std::string& strategy) {
  SyncSchedule schedule;
  schedule.strategy = strategy;
  return schedule;
}

SyncSchedule periodicSchedule(const std::string& strategy, int64_t every) {
  SyncSchedule schedule;
  schedule.strategy = strategy;
  schedule.periodic = true;
  schedule.every = every;
  return schedule;
}

int64_t sendOffset(int64_t fragment, int64_t fragments, int64_t every) {
  return (fragment + 1) * every / fragments % every;
}

std::string scheduleProblem(const SyncSchedule& schedule) {
  if (!isStrategyName(schedule.strategy)) {
    return "strategy is not a strategy's name; expected 1 to 64 of a-z, 0-9, '-' and '_'";
  }
  const int64_t max_every = schedule.periodic ? kMaxSyncEvery : 1;
  if (schedule.every < 1 || schedule.every > max_every) return outside("every", schedule.every, 1, max_every);
  const int64_t max_fragments = schedule.periodic ? schedule.every : 1;
  if (schedule.fragments < 1 || schedule.fragments > max_fragments) {
    return outside("fragments", schedule.fragments, 1, max_fragments);
  }
  const int64_t max_delay = schedule.periodic ? schedule.every : 0;
  if (schedule.delay < 0 || schedule.delay > max_delay) return outside("delay", schedule.delay, 0, max_delay);
  if (schedule.warmup_steps < 0) {
    return outside("warmup_steps", schedule.warmup_steps, 0, std::numeric_limits<int64_t>::max());
  }
  return "";
}

}  // namespace gcrun
