#include "experiments/training/lr_schedule.h"

#include <algorithm>

namespace gcrun::experiments {

double learningRate(const OptimizerOptions& options, double base_rate, int world_size, double epoch) {
  const double factor =
      options.scale_lr_with_factor > 0 ? options.scale_lr_with_factor : static_cast<double>(world_size);
  const double warmup = options.warmup_epochs > 0 ? std::min(epoch / options.warmup_epochs, 1.0) : 1.0;
  double rate = base_rate * (1.0 + (factor - 1.0) * warmup);
  for (double decay_epoch : options.decay_at_epochs) {
    if (decay_epoch <= epoch) rate /= options.decay_with_factor;
  }
  return rate;
}

}  // namespace gcrun::experiments
