#include "tests/support/multi_rank.h"

#include "reducers/thread_group.h"

namespace gcrun::testing {

void runRanks(int world_size, const std::function<void(reducers::Communicator&)>& fn) {
  reducers::runThreadGroup(world_size, std::chrono::seconds(60), fn);
}

}  // namespace gcrun::testing
