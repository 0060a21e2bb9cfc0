#pragma once

#include <vector>

namespace gcrun::tasks {

// A model constructed with this makes its parameters on the meta device, uninitialised: their
// names and shapes in the model's order, in no memory (`gcrun plan`'s models, tasks/model_plan.h).
struct ShapeOnly {};

// `count` parameter tensors of one shape. Dimensions are doubles: a model's size is computed from
// its settings before anything is built, and a setting such as task.width=2^62 must give a huge
// size to refuse, not an overflowed one.
struct TensorGroup {
  std::vector<double> shape;
  double count = 1;
};

// What a task's model holds, from its settings alone (no data read, nothing allocated): the memory
// check before a run (experiments/setup/memory_estimate.h) and the strategies that keep copies or
// per-tensor matrices of it.
struct ModelSize {
  std::vector<TensorGroup> parameters;  // float32 each
  // Bytes a worker holds for the model besides its parameters where the settings make them grow:
  // constant buffers and one training step's activations.
  double other_bytes = 0;

  // The elements of all parameters together.
  double parameterCount() const {
    double total = 0;
    for (const auto& group : parameters) {
      double elements = group.count;
      for (double side : group.shape) elements *= side;
      total += elements;
    }
    return total;
  }
};

}  // namespace gcrun::tasks
