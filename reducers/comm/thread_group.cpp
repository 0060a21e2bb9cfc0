#include "reducers/comm/thread_group.h"

#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "hyperparams/base/thread_team.h"
#include "reducers/comm/process_group.h"

namespace gcrun::comm {

void runThreadGroup(int world_size, std::chrono::milliseconds timeout, const std::function<void(Communicator&)>& fn) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::mutex mutex;
  std::string first_failure;
  runThreadTeam(
      world_size,
      [&](int rank) {
        try {
          auto comm = glooOverStore(store, rank, world_size, timeout);
          fn(*comm);
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> lock(mutex);
          if (first_failure.empty()) first_failure = "rank " + std::to_string(rank) + ": " + e.what();
        }
      },
      "a thread group of " + std::to_string(world_size) + " ranks");
  if (!first_failure.empty()) throw std::runtime_error(first_failure);
}

}  // namespace gcrun::comm
