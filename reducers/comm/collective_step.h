#pragma once

#include <cstdint>
#include <optional>

namespace gcrun::comm {

// The step that the collectives this thread issues belong to, when it is not the step its worker
// is in: a background thread's exchange started at a step the worker has left since
// (streaming-diloco). A trace (experiments/trace) reads it; nothing else does.
inline std::optional<int64_t>& collectiveStep() {
  thread_local std::optional<int64_t> step;
  return step;
}

// Sets collectiveStep() for its scope, on this thread.
class CollectiveStepScope {
 public:
  explicit CollectiveStepScope(int64_t step) { collectiveStep() = step; }
  ~CollectiveStepScope() { collectiveStep().reset(); }
  CollectiveStepScope(const CollectiveStepScope&) = delete;
  CollectiveStepScope& operator=(const CollectiveStepScope&) = delete;
};

}  // namespace gcrun::comm
