#include "tasks/prefetch.h"
#include "tasks/device_transfer.h"

#include <utility>

namespace gcrun::tasks {

PrefetchingBatchStream::PrefetchingBatchStream(Producer producer, c10::Device device, size_t depth)
    : producer_(std::move(producer)), device_(device), depth_(depth < 1 ? 1 : depth) {
  thread_ = std::thread([this] { run(); });
}

PrefetchingBatchStream::~PrefetchingBatchStream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void PrefetchingBatchStream::run() {
  try {
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [this] { return stopping_ || ready_.size() < depth_; });
        if (stopping_) return;
      }
      std::optional<Batch> batch = producer_();
      std::lock_guard<std::mutex> lock(mutex_);
      if (!batch) break;
      ready_.push_back(std::move(*batch));
      changed_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    failure_ = std::current_exception();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  finished_ = true;
  changed_.notify_all();
}

std::optional<Batch> PrefetchingBatchStream::next() {
  Batch batch;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return !ready_.empty() || finished_; });
    if (ready_.empty()) {
      if (failure_) std::rethrow_exception(failure_);
      return std::nullopt;
    }
    batch = std::move(ready_.front());
    ready_.pop_front();
  }
  changed_.notify_all();
  return Batch{toDevice(batch.inputs, device_), toDevice(batch.targets, device_)};
}

}  // namespace gcrun::tasks
