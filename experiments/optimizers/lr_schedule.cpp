#include "experiments/optimizers/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace gcrun::experiments {
namespace {

class ReferenceSchedule final : public LearningRateSchedule {
 public:
  explicit ReferenceSchedule(const ScheduleContext& context)
      : options_(context.options), world_size_(context.world_size) {}

  double rate(double base_rate, const StepPosition& at) const override {
    return learningRate(options_, base_rate, world_size_, at.epoch);
  }

 private:
  OptimizerOptions options_;
  int world_size_;
};

// No world-size scaling: nanoGPT's rate is the rate of the whole batch.
class CosineSchedule final : public LearningRateSchedule {
 public:
  explicit CosineSchedule(const ScheduleContext& context)
      : options_(context.options),
        decay_steps_(context.options.decay_steps > 0 ? context.options.decay_steps : context.total_steps) {}

  double rate(double base_rate, const StepPosition& at) const override {
    return cosineLearningRate(options_, base_rate, decay_steps_, at.step);
  }

 private:
  OptimizerOptions options_;
  int64_t decay_steps_;
};

}  // namespace

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

// Python's operations in nanoGPT's order: lr * (it + 1) / (warmup + 1) multiplies first.
double cosineLearningRate(const OptimizerOptions& options, double base_rate, int64_t decay_steps, int64_t step) {
  const int64_t warmup = options.warmup_steps;
  if (step < warmup) return base_rate * static_cast<double>(step + 1) / static_cast<double>(warmup + 1);
  const double min_rate = options.min_learning_rate;
  if (step >= decay_steps) return min_rate;
  const double ratio = static_cast<double>(step - warmup) / static_cast<double>(decay_steps - warmup);
  const double coefficient = 0.5 * (1.0 + std::cos(M_PI * ratio));
  return min_rate + coefficient * (base_rate - min_rate);
}

Registry<ScheduleFactory>& scheduleRegistry() {
  static Registry<ScheduleFactory>* registry = [] {
    auto* r = new Registry<ScheduleFactory>("learning-rate schedule");
    r->add("reference", "the reference's: warm-up over optimizer.warmup_epochs, decays at optimizer.decay_at_epochs",
           [](const ScheduleContext& c) { return std::make_unique<ReferenceSchedule>(c); });
    r->add("cosine", "nanoGPT's: warm-up over optimizer.warmup_steps, cosine decay to optimizer.min_learning_rate",
           [](const ScheduleContext& c) { return std::make_unique<CosineSchedule>(c); });
    return r;
  }();
  return *registry;
}

}  // namespace gcrun::experiments
