#pragma once

#include <string>

#include "experiments/trainer.h"
#include "hyperparams/config.h"
#include "reducers/communicator.h"

namespace gcrun::experiments {

struct RunOptions {
  // Empty: a new folder under ./outputs/ (see outputs::createRunDirectory).
  std::string output_dir;
};

struct RunResult {
  std::string run_dir;
  TrainingResult training;
};

// Checks every name the config gives against the registries (task, architecture, reducer, sinks)
// and the device and backend against this build, so bad input fails before any worker starts.
void checkConfig(const ExperimentConfig& config);

// Runs this process's worker of the experiment: joins the group that the torchrun variables
// describe (or runs alone), then as runWorker below.
RunResult runWorker(const ExperimentConfig& config, const RunOptions& options);

// Runs one worker over an existing group: rank 0 creates the run directory and tells the others;
// every rank logs to its own file; rank 0 writes config.yaml, run.json, timer_summary.json and the
// sinks' files. run.json records "failed" and the error when training throws.
RunResult runWorker(const ExperimentConfig& config, const RunOptions& options,
                    reducers::Communicator& comm);

}  // namespace gcrun::experiments
