#include "hyperparams/base/thread_team.h"

#include <condition_variable>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

namespace gcrun {

void runThreadTeam(int count, const std::function<void(int)>& work, const std::string& what) {
  std::mutex mutex;
  std::condition_variable released;
  enum class Gate { closed, go, abandon } gate = Gate::closed;
  std::exception_ptr first_failure;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(count));
  const auto open = [&](Gate state) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      gate = state;
    }
    released.notify_all();
  };
  std::string failure;
  for (int index = 0; index < count && failure.empty(); ++index) {
    try {
      threads.emplace_back([&, index] {
        {
          std::unique_lock<std::mutex> lock(mutex);
          released.wait(lock, [&] { return gate != Gate::closed; });
          if (gate == Gate::abandon) return;
        }
        try {
          work(index);
        } catch (...) {
          std::lock_guard<std::mutex> lock(mutex);
          if (!first_failure) first_failure = std::current_exception();
        }
      });
    } catch (const std::system_error& e) {
      failure = "cannot start thread " + std::to_string(index + 1) + " of " + std::to_string(count) + " for " + what +
                ": " + e.code().message() + " (a thread or memory limit; ask for fewer)";
    }
  }
  open(failure.empty() ? Gate::go : Gate::abandon);
  for (auto& thread : threads) thread.join();
  if (!failure.empty()) throw std::runtime_error(failure);
  if (first_failure) std::rethrow_exception(first_failure);
}

}  // namespace gcrun
