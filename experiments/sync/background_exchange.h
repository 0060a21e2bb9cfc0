#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace gcrun::experiments {

// A thread of its own that runs one job at a time while its owner goes on computing:
// streaming-diloco's fragment exchange, started at the fragment's sending step and waited for τ
// steps later. A job that throws hands its exception to the next wait().
class BackgroundExchange {
 public:
  BackgroundExchange();
  // Waits for the job in flight (its failure is dropped: the owner is going away, and its own
  // error, if any, says more), then ends the thread.
  ~BackgroundExchange();
  BackgroundExchange(const BackgroundExchange&) = delete;
  BackgroundExchange& operator=(const BackgroundExchange&) = delete;

  // Runs `job` on the thread; a job still in flight is waited for first.
  void start(std::function<void()> job);
  // Returns once no job is in flight; rethrows, once, the exception of the job that ended.
  void wait();

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::function<void()> job_;  // set while a job is queued or running
  std::exception_ptr failure_;
  bool stopping_ = false;
  std::thread thread_;  // last: it starts once the rest is built
};

}  // namespace gcrun::experiments
