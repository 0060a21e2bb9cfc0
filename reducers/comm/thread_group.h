#pragma once

#include <chrono>
#include <functional>

#include "reducers/comm/communicator.h"

namespace gcrun::comm {

// Runs fn on world_size threads in this process, one per rank, each with a real Gloo group on
// loopback over a shared in-memory HashStore: benchmarks and tests get several workers without
// launching processes. Rethrows the first failure as std::runtime_error naming its rank.
void runThreadGroup(int world_size, std::chrono::milliseconds timeout, const std::function<void(Communicator&)>& fn);

}  // namespace gcrun::comm
