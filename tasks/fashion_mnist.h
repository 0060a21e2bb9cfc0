#pragma once

#include <memory>

#include "tasks/task.h"

namespace gcrun::tasks {

// Where the Debian package dataset-fashion-mnist installs the four *-ubyte.gz files.
inline constexpr const char* kFashionMnistDefaultDir = "/usr/share/datasets/fashion-mnist";

// The `fashion-mnist` task: 60,000 train and 10,000 test 28x28 grayscale images in 10 classes,
// the model named by task.architecture, cross-entropy loss; metrics cross_entropy and accuracy.
std::unique_ptr<Task> makeFashionMnistTask(const TaskContext& context);
// TaskSpec::check: its settings, data and each worker's share of batches, without a model.
void checkFashionMnistInput(const TaskContext& context, int world_size);
// Its model's size (TaskSpec::size).
ModelSize fashionMnistModelSize(const TaskOptions& options, int64_t batch_size);
// Its model for `gcrun plan` (TaskSpec::plan).
ModelPlan fashionMnistModelPlan(const TaskOptions& options, int64_t batch_size);

}  // namespace gcrun::tasks
