#include "experiments/worker/timeout_advice.h"

#include <spdlog/fmt/fmt.h>

#include "hyperparams/base/units.h"

namespace gcrun::experiments {
namespace {

// What the peers were doing while this rank waited.
std::string whyItWaited(const std::optional<SimulatedTurns>& turns) {
  if (!turns) return "a peer did not reach the same collective in that time";
  std::string why = fmt::format("the simulated workers compute in turn, {} of them", turns->workers);
  if (turns->longest_turn_s <= 0) return why;
  return why + fmt::format(" at ~{} a turn need about {}", units::elapsedText(turns->longest_turn_s),
                           units::elapsedText(turns->workers * turns->longest_turn_s));
}

}  // namespace

std::string collectiveFailureText(const comm::CollectiveFailed& failure, double timeout_s,
                                  const std::optional<SimulatedTurns>& turns) {
  if (!failure.timedOut()) return failure.what();
  return fmt::format(
      "a collective on rank {} timed out after {} (distributed.timeout_s: {:g}); {}: raise "
      "distributed.timeout_s ({})",
      failure.rank(), comm::secondsText(failure.timeout()), timeout_s, whyItWaited(turns), failure.backendLine());
}

}  // namespace gcrun::experiments
