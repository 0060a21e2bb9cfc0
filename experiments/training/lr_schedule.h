#pragma once

#include "hyperparams/config.h"

namespace gcrun::experiments {

// The reference's get_learning_rate (powersgd.md 1.3.6): the base rate times a factor that rises
// linearly from 1 to F over the warm-up epochs (F = optimizer.scale_lr_with_factor, or the number
// of workers when that is 0), divided by decay_with_factor for every decay epoch already reached.
// `epoch` is fractional: epoch + batch / batches_per_epoch.
double learningRate(const OptimizerOptions& options, double base_rate, int world_size, double epoch);

}  // namespace gcrun::experiments
