#include "tests/support/multi_rank.h"

#include "reducers/comm/thread_group.h"

namespace gcrun::testing {

void runRanks(int world_size, const std::function<void(comm::Communicator&)>& fn) {
  comm::runThreadGroup(world_size, std::chrono::seconds(60), fn);
}

}  // namespace gcrun::testing
