#include "reducers/comm/thread_group.h"

#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "reducers/comm/process_group.h"

namespace gcrun::comm {

void runThreadGroup(int world_size, std::chrono::milliseconds timeout,
                    const std::function<void(Communicator&)>& fn) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::mutex mutex;
  std::string first_failure;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world_size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        auto comm = glooOverStore(store, rank, world_size, timeout);
        fn(*comm);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mutex);
        if (first_failure.empty()) first_failure = "rank " + std::to_string(rank) + ": " + e.what();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  if (!first_failure.empty()) throw std::runtime_error(first_failure);
}

}  // namespace gcrun::comm
