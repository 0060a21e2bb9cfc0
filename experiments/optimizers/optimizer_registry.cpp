#include "experiments/optimizers/optimizer.h"

#include "hyperparams/base/errors.h"

namespace gcrun::experiments {

// Each optimizer's factory and spec, defined in its own file.
std::unique_ptr<Optimizer> makeReferenceSgd(const OptimizerContext& context);
OptimizerSpec adamWSpec();

Registry<OptimizerSpec>& optimizerRegistry() {
  static Registry<OptimizerSpec>* registry = [] {
    auto* r = new Registry<OptimizerSpec>("optimizer");
    r->add("sgd", "the reference's SGD: weight-decay groups by name, three momentum forms, parts before the reduce",
           {[](const OptimizerOptions&) {}, makeReferenceSgd, /*state_copies=*/1});
    r->add("adamw", "torch 1.13's AdamW (decoupled weight decay of the matrices; embeddings optional)", adamWSpec());
    return r;
  }();
  return *registry;
}

std::unique_ptr<LearningRateSchedule> makeSchedule(const OptimizerContext& context) {
  return scheduleRegistry()
      .at(context.options.schedule)
      .factory(ScheduleContext{context.options, context.world_size, context.total_steps});
}

const OptimizerSpec& checkedOptimizer(const OptimizerOptions& options) {
  try {
    scheduleRegistry().at(options.schedule);
  } catch (const UserError& e) {
    throw UserError("optimizer.schedule: " + std::string(e.what()));
  }
  const OptimizerSpec* spec = nullptr;
  try {
    spec = &optimizerRegistry().at(options.name).factory;
  } catch (const UserError& e) {
    throw UserError("optimizer.name: " + std::string(e.what()));
  }
  spec->validate(options);
  return *spec;
}

}  // namespace gcrun::experiments
