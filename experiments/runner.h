#pragma once

#include <string>

#include "experiments/worker_run.h"
#include "hyperparams/config.h"
#include "reducers/comm/communicator.h"
#include "reducers/comm/world.h"

namespace gcrun::experiments {

// Checks every name the config gives against the registries (task, architecture, reducer, sinks)
// and the device and backend against this build, so bad input fails before any worker starts.
void checkConfig(const ExperimentConfig& config);

// Builds the task once, as a worker would, to find bad input (data files, the architecture, a
// batch larger than each of `world_size` workers' data) before anything is written: the launcher's
// check. Throws UserError.
void checkInputs(const ExperimentConfig& config, int world_size);

// Runs this process's worker of the experiment: joins the group that `world` describes (one worker
// alone when nothing launched it; see experiments/launch/launch_environment.h), then as runWorker
// below. Beyond it: SIGINT and SIGTERM stop every
// worker after the same step with a checkpoint, and when a collective fails the error names the
// peer that failed (comm::PeerMonitor).
RunResult runWorker(const ExperimentConfig& config, const RunOptions& options, const comm::WorldSpec& world);

// Runs one worker over an existing group (a WorkerRun, see worker_run.h), which no signal stops.
// `local_rank` picks this worker's GPU on device: cuda.
RunResult runWorker(const ExperimentConfig& config, const RunOptions& options, comm::Communicator& comm,
                    int local_rank = 0);

}  // namespace gcrun::experiments
