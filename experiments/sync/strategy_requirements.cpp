#include "experiments/sync/strategy_requirements.h"

#include <utility>

#include "hyperparams/base/errors.h"

namespace gcrun::experiments {

StrategyRequirements::StrategyRequirements(std::string strategy, std::string example)
    : strategy_(std::move(strategy)), example_(std::move(example)) {}

StrategyRequirements& StrategyRequirements::require(bool met, const std::string& key, const std::string& wanted,
                                                    const std::string& got, const std::string& why) {
  if (!met) unmet_.push_back({key, wanted, got, why});
  return *this;
}

void StrategyRequirements::check() const {
  if (unmet_.empty()) return;
  if (unmet_.size() == 1) {
    const auto& only = unmet_.front();
    throw UserError(only.key + ": " + only.why + "; set " + only.key + "=" + only.wanted + " (got " + only.got + ")");
  }
  std::string each, flags;
  for (const auto& unmet : unmet_) {
    each += (each.empty() ? "" : "; ") + unmet.key + "=" + unmet.wanted + " (got " + unmet.got + ": " + unmet.why + ")";
    flags += " --set " + unmet.key + "=" + unmet.wanted;
  }
  throw UserError("sync.strategy=" + strategy_ + " needs " + std::to_string(unmet_.size()) +
                  " settings changed: " + each + "; add" + flags + (example_.empty() ? "" : " (" + example_ + ")"));
}

}  // namespace gcrun::experiments
