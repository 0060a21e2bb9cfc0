#pragma once

#include "experiments/setup/resolved_experiment.h"

namespace gcrun::experiments {

// The memory one process of a run needs for its model and strategy, estimated from the settings
// alone before anything is built: for each of its workers (distributed.simulated_workers) the
// parameters, their gradient and error-feedback buffers and the optimizer's state (a float each
// per parameter and copy, OptimizerSpec::state_copies), what the task says its model holds
// besides (TaskSpec::size: a training step's activations) and what the strategy keeps
// (SynchronizerSpec::memory: a global copy, outer momentum, DCT matrices). In doubles, so that no
// setting overflows it. LibTorch's own memory and the data are not counted: a lower bound.
// 0 when the task does not say its model's size.
double estimatedBytes(const ResolvedExperiment& experiment);

// This machine's physical memory in bytes (sysconf: physical pages times the page size).
double machineMemoryBytes();

// Refuses, with a UserError of one line, a run whose estimate exceeds `machine_bytes`: it names
// the setting most responsible (the one whose default would shrink the estimate most), the
// estimate and the machine's memory.
void checkMemory(const ResolvedExperiment& experiment, double machine_bytes);

}  // namespace gcrun::experiments
