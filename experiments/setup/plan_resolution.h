#pragma once

#include "experiments/setup/resolved_experiment.h"

namespace gcrun::experiments {

// resolve() for `gcrun plan`: every check `gcrun experiment` makes of a configuration before it
// reads data (values, names, the reducer's and the strategy's refusals, the optimizer's checks),
// but not the machine's memory: a plan is of models this machine need not hold.
ResolvedExperiment resolveForPlan(const ExperimentConfig& config);

}  // namespace gcrun::experiments
