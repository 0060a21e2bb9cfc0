#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "experiments/optimizers/optimizer.h"
#include "experiments/sync/synchronizer.h"
#include "hyperparams/base/tensor_map.h"
#include "tasks/task.h"

namespace gcrun::experiments {

// Where the training loop is and what it has counted: the next batch is `batch_index` of `epoch`.
struct LoopPosition {
  int64_t step = 0;
  int64_t epoch = 0;
  int64_t batch_index = 0;
  uint64_t bits = 0;
  int64_t syncs = 0;       // syncs of the workers' models (Synchronizer::lastSync)
  uint64_t sync_bits = 0;  // what those syncs sent
  double loss_sum = 0;     // this epoch's, so far
  double window_loss = 0;  // this worker's loss summed since the last per-step log
  int64_t window_steps = 0;
  double elapsed_s = 0;          // wall-clock time trained, across resumes
  tasks::MetricSums train_sums;  // this epoch's, so far
};

// What one rank's checkpoint holds, by entry prefix: param/, buffer/ (the model), task/ (its
// saveState()), counter/ and train_sums/ (the LoopPosition; counter/window_* and counter/sync* are optional,
// for checkpoints written before they existed), the optimizer's own (sgd: momentum/; adamw: adamw/)
// and the synchronizer's own (every-step: memory/ and reducer/). Restoring it makes the rest of
// the run what the saved run would have done.
struct TrainingParts {
  tasks::Task& task;
  Synchronizer& synchronizer;
  Optimizer& optimizer;
};

TensorMap snapshotTraining(const TrainingParts& parts, const LoopPosition& position);

// What a checkpoint of this run holds, each entry of the dtype and shape this run saves it with:
// snapshotTraining's entries now, and every entry the optimizer may save (Optimizer::expectState).
// The synchronizer's and task's entries are those they save before their first step.
TensorMap expectedTraining(const TrainingParts& parts);
// The bytes of the tensors of `state`.
uint64_t bytesOf(const TensorMap& state);

// The batches of `position`'s epoch from its batch on; a mid-epoch resume's task state is loaded
// (and reset) once they are set up, as Task::loadState() requires.
std::unique_ptr<tasks::BatchStream> batchesFrom(tasks::Task& task, const tasks::Shard& shard,
                                                const LoopPosition& position,
                                                std::optional<tasks::Task::State>& task_state);

// Copies the saved tensors into `parts` and returns the position. The task's state comes back
// separately (set only mid-epoch): it is loaded once the epoch's batches are set up again. Before
// anything is copied, a missing entry, one this run does not save, or one of another shape or
// dtype than expectedTraining's is a UserError naming it (the entries the synchronizer checks
// itself aside; an optimizer's entry may be missing where Optimizer::mayLack says), and so is a
// counter that no run of `batches_per_epoch` batches an epoch could have saved.
LoopPosition restoreTraining(const TensorMap& state, const TrainingParts& parts, int64_t batches_per_epoch,
                             std::optional<tasks::Task::State>& task_state);

}  // namespace gcrun::experiments
