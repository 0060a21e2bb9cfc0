#include "tasks/task.h"

#include <string>

#include "hyperparams/base/errors.h"

namespace gcrun::tasks {

int64_t batchesPerEpochOf(const Task& task, const Shard& shard, int64_t batch_size) {
  return checkedBatchCount(task.batchesPerEpoch(shard), shard, batch_size);
}

int64_t checkedBatchCount(int64_t batches, const Shard& shard, int64_t batch_size) {
  if (batches > 0) return batches;
  throw UserError("training.batch_size = " + std::to_string(batch_size) + " leaves no full batch for each of " +
                  std::to_string(shard.world_size) + " workers; use a smaller batch size");
}

}  // namespace gcrun::tasks
