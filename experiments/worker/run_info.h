#pragma once

#include <vector>

#include "hyperparams/config.h"
#include "outputs/run_info.h"
#include "outputs/timer.h"
#include "reducers/comm/communicator.h"
#include "tasks/task.h"

namespace gcrun::experiments {

// What run.json and the log say about one worker's run.

// Every rank's peak resident memory (MiB), in rank order (a collective).
std::vector<double> gatherPeakRss(comm::Communicator& comm);

// run.json as a run starts: versions, world, device, the model's size, where each setting came
// from, status "running".
outputs::RunInfo startInfo(const ExperimentConfig& config, comm::Communicator& comm, tasks::Task& task);

// run.json of a run that bad input stopped before training: versions, status "refused", `error`.
outputs::RunInfo refusedInfo(const std::string& experiment, const std::string& error);

// One worker's own compute per step: the medians of its forward and backward passes.
double computePerBatchMs(const outputs::Timer& timer);

// The final line on the preset's published result, if it has one.
void logPaperComparison(const outputs::PaperComparison& paper);

}  // namespace gcrun::experiments
