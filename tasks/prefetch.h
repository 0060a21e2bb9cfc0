#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include <c10/core/Device.h>

#include "tasks/task.h"

namespace gcrun::tasks {

// Runs a batch producer on a background thread, `depth` batches ahead of the trainer, so that
// reading and augmenting never shows in the `batch` timer. The producer returns CPU batches and
// nullopt at the end of the epoch; next() moves each batch to `device` and rethrows whatever the
// producer threw. Destroying the stream early (training.max_steps) stops and joins the thread.
class PrefetchingBatchStream : public BatchStream {
 public:
  using Producer = std::function<std::optional<Batch>()>;

  PrefetchingBatchStream(Producer producer, c10::Device device, size_t depth = 2);
  ~PrefetchingBatchStream() override;

  std::optional<Batch> next() override;

 private:
  void run();

  Producer producer_;
  c10::Device device_;
  size_t depth_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Batch> ready_;
  bool finished_ = false;
  bool stopping_ = false;
  std::exception_ptr failure_;
  std::thread thread_;
};

}  // namespace gcrun::tasks
