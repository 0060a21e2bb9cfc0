#pragma once

#include <functional>

#include "reducers/comm/communicator.h"

namespace gcrun::testing {

// Runs fn on world_size threads, one per rank, each with a real Gloo group on loopback over a
// shared in-memory HashStore; rethrows the first failure with its rank in the message.
void runRanks(int world_size, const std::function<void(comm::Communicator&)>& fn);

}  // namespace gcrun::testing
