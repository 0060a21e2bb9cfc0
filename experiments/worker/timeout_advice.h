#pragma once

#include <optional>
#include <string>

#include "reducers/comm/collective_failure.h"

namespace gcrun::experiments {

// A process's simulated workers, which compute in turn while the others' collectives wait.
struct SimulatedTurns {
  int workers = 0;
  double longest_turn_s = 0;  // 0 when no turn was timed
};

// The line a run fails with when one of its collectives failed: for a timeout, the setting to
// raise with its value and what the peers were doing where this process knows (simulated workers
// waiting for their turn), then the backend's own line; otherwise the failure's own text.
std::string collectiveFailureText(const comm::CollectiveFailed& failure, double timeout_s,
                                  const std::optional<SimulatedTurns>& turns);

}  // namespace gcrun::experiments
