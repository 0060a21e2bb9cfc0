#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "experiments/optimizers/lr_schedule.h"
#include "hyperparams/base/registry.h"
#include "hyperparams/base/tensor_map.h"
#include "hyperparams/config.h"

namespace gcrun::experiments {

// What an optimizer works with, built once by the trainer; every reference outlives the optimizer.
struct OptimizerContext {
  const OptimizerOptions& options;
  const std::vector<at::Tensor>& params;
  const std::vector<std::string>& names;  // the parameters', in order
  // grads[i] is params[i]'s gradient buffer: the synchronizer fills it, the optimizer updates it in
  // place (weight decay, momentum, the clip) and steps along it.
  const std::vector<at::Tensor>& grads;
  // The task's embedding tables by parameter name (Task::embeddingParameters()).
  std::vector<std::string> embeddings;
  int world_size;
  int64_t total_steps;  // of the whole run (training.epochs and training.max_steps)
};

// The parts of a step the trainer times under their own labels (timer_summary.json's batch.wd,
// batch.mom and batch.step).
enum class StepPart { weight_decay, momentum, update };
// Runs `part`'s work, timed as that part.
using TimedPart = std::function<void(StepPart, const std::function<void()>&)>;

// One worker's optimizer over its parameters and their gradient buffers. The trainer calls, in
// lockstep on every worker:
//   beforeSend(i) on parameter i's final gradient, before the synchronizer sends it;
//   step(at, timed) once the reduce has delivered every gradient.
// Its state goes into the worker's checkpoint under entry names of its own, and coming back from
// one it continues as the saved run would have.
class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // What the config puts before the reduce (the reference SGD's weight decay and momentum).
  virtual void beforeSend(size_t i) = 0;
  // The step after the reduce: every parameter moved along its gradient at position `at`.
  virtual void step(const StepPosition& at, const TimedPart& timed) = 0;
  // The base learning rate (optimizer.learning_rate's group) at `at`, as the metrics log it.
  virtual double learningRate(const StepPosition& at) const = 0;

  // Adds its checkpoint entries as they are now.
  virtual void saveState(TensorMap& state) const = 0;
  // Adds every entry a checkpoint of it may hold, of the dtype and shape a restore expects.
  virtual void expectState(TensorMap& expected) const = 0;
  // Whether a checkpoint may lack entry `name` (state made at a parameter's first step).
  virtual bool mayLack(const std::string& name) const = 0;
  // Copies its entries back from a checkpoint's `state`, whose entries were checked against
  // expectState() and mayLack(); its counter/step (savedStep()) bounds the steps it counted.
  virtual void loadState(const TensorMap& state) = 0;
};

struct OptimizerSpec {
  // Throws UserError naming the key when `options` ask for what the optimizer does not do.
  std::function<void(const OptimizerOptions&)> validate;
  std::function<std::unique_ptr<Optimizer>(const OptimizerContext&)> make;
  // Parameter-sized tensors of state it keeps (momenta, moments): the memory check before a run.
  int state_copies = 0;
};

// The optimizers, by optimizer.name; the built-ins are registered on first use. An optimizer is
// one file in experiments/optimizers/ and its entry in optimizer_registry.cpp.
Registry<OptimizerSpec>& optimizerRegistry();

// optimizer.schedule's schedule over the run `context` describes.
std::unique_ptr<LearningRateSchedule> makeSchedule(const OptimizerContext& context);

// The optimizer and schedule `options` name, looked up, and the optimizer's own checks; a
// UserError naming the key otherwise.
const OptimizerSpec& checkedOptimizer(const OptimizerOptions& options);

}  // namespace gcrun::experiments
