#pragma once

#include "experiments/setup/request.h"

namespace gcrun::experiments {

// Runs the request in whatever role this process has, decided once from its environment:
//  - a worker (a launcher's variables are set): joins the group and trains;
//  - one worker alone (--nproc-per-node 1, one node): trains in this process;
//  - otherwise the launcher: checks the configuration, makes the run directory (node 0), starts
//    this node's workers and waits for them.
// Returns the exit code: 0, 128 + a signal that stopped the run, or a failed worker's code. Bad
// input throws UserError before anything is written; runtime failures throw other exceptions.
int runExperiment(const ExperimentRequest& request);

// A worker that gcrun's launcher started (`request.resolved_file` set, see runExperiment's
// launcher): it starts from what its launcher resolved and runs as runExperiment's workers do;
// of the request it reads only the file and --resume.
int runLaunchedWorker(const ExperimentRequest& request);

}  // namespace gcrun::experiments
