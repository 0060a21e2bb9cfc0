#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "hyperparams/base/registry.h"
#include "hyperparams/config.h"

namespace gcrun::experiments {

// Where a step is in the run: its 0-based index and the fractional epoch it starts at (epoch +
// batch / batches_per_epoch).
struct StepPosition {
  int64_t step = 0;
  double epoch = 0;
};

// The reference's get_learning_rate (powersgd.md 1.3.6): the base rate times a factor that rises
// linearly from 1 to F over the warm-up epochs (F = optimizer.scale_lr_with_factor, or the number
// of workers when that is 0), divided by decay_with_factor for every decay epoch already reached.
// `epoch` is fractional: epoch + batch / batches_per_epoch.
double learningRate(const OptimizerOptions& options, double base_rate, int world_size, double epoch);

// nanoGPT's get_lr, in double, for the 0-based step `step`: a linear warm-up to `base_rate` over
// warmup_steps, then a cosine decay to min_learning_rate at `decay_steps`, and min_learning_rate
// after. Where nanoGPT would divide by zero (step == warmup_steps == decay_steps) it gives
// min_learning_rate; at step == decay_steps nanoGPT's formula gives exactly that too.
double cosineLearningRate(const OptimizerOptions& options, double base_rate, int64_t decay_steps, int64_t step);

struct ScheduleContext {
  const OptimizerOptions& options;
  int world_size;
  int64_t total_steps;  // of the whole run
};

// A learning rate for every position of the run, from a group's base rate.
class LearningRateSchedule {
 public:
  virtual ~LearningRateSchedule() = default;
  virtual double rate(double base_rate, const StepPosition& at) const = 0;
};

using ScheduleFactory = std::function<std::unique_ptr<LearningRateSchedule>(const ScheduleContext&)>;

// The schedules, by optimizer.schedule: reference (learningRate above, by epoch) and cosine
// (cosineLearningRate, by step; optimizer.decay_steps 0 stands for the run's total steps).
Registry<ScheduleFactory>& scheduleRegistry();

}  // namespace gcrun::experiments
