#pragma once

#include <string>

#include "experiments/resolved_experiment.h"
#include "experiments/trainer.h"
#include "hyperparams/config.h"
#include "reducers/comm/communicator.h"
#include "reducers/comm/world.h"

namespace gcrun::experiments {

struct RunOptions {
  // Empty: a new folder under ./outputs/ (see outputs::createRunDirectory).
  std::string output_dir;
  // Continue the run in output_dir from its latest complete checkpoint (see CheckpointStore).
  bool resume = false;
};

struct RunResult {
  std::string run_dir;
  TrainingResult training;
  // SIGINT or SIGTERM when one stopped the run (after a final checkpoint); 0 otherwise.
  int stop_signal = 0;
};

// Runs this process's worker of the experiment: joins the group that `world` describes (one worker
// alone when nothing launched it; see experiments/launch/launch_environment.h), then as runWorker
// below. Beyond it: SIGINT and SIGTERM stop every
// worker after the same step with a checkpoint, and when a collective fails the error names the
// peer that failed (comm::PeerMonitor).
RunResult runWorker(const ResolvedExperiment& experiment, const RunOptions& options, const comm::WorldSpec& world);

// Runs one worker over an existing group: rank 0 creates the run directory and tells the others
// (a rank on another machine creates the same path there for its log and checkpoint files);
// every rank logs to its own file; rank 0 writes config.yaml, run.json, timer_summary.json and the
// sinks' files. run.json records "failed" and the error when training throws. With
// options.resume, the checkpoint is read and checked before anything in the directory is written.
// `local_rank` picks this worker's GPU on device: cuda.
RunResult runWorker(const ResolvedExperiment& experiment, const RunOptions& options, comm::Communicator& comm,
                    int local_rank = 0);

}  // namespace gcrun::experiments
