#pragma once

#include <string>

#include "experiments/setup/resolved_experiment.h"
#include "experiments/worker/worker_run.h"
#include "hyperparams/config.h"
#include "reducers/comm/communicator.h"
#include "reducers/comm/world.h"

namespace gcrun::experiments {

// Runs this process's worker of the experiment: joins the group that `world` describes (one worker
// alone when nothing launched it; see experiments/launch/launch_environment.h), then as runWorker
// below. Beyond it: SIGINT and SIGTERM stop every
// worker after the same step with a checkpoint, and when a collective fails the error names the
// peer that failed (comm::PeerMonitor).
RunResult runWorker(const ResolvedExperiment& experiment, const RunOptions& options, const comm::WorldSpec& world);

// Runs one worker over an existing group (a WorkerRun, see worker_run.h), which no signal stops.
// `local_rank` picks this worker's GPU on device: cuda.
RunResult runWorker(const ResolvedExperiment& experiment, const RunOptions& options, comm::Communicator& comm,
                    int local_rank = 0);

}  // namespace gcrun::experiments
