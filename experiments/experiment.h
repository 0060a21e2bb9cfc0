#pragma once

#include <string>
#include <vector>

#include "experiments/launch/launcher.h"

namespace gcrun::experiments {

// One `gcrun experiment` as the command line (or a study) asks for it; experiments/command_line.h
// parses it and writes it back out as arguments.
struct ExperimentRequest {
  std::string preset;                    // e.g. fashion-powersgd-rank2
  std::string config_file;               // YAML settings over the preset; empty: none
  std::vector<std::string> assignments;  // key=value, applied last
  std::string output_dir;                // empty: a new folder under runs/
  std::string resume_dir;                // not empty: continue this run from its latest checkpoint
  launch::LaunchOptions launch;          // this machine's part when gcrun starts the workers
  std::vector<std::string> plugins;      // --plugin libraries, loaded by the CLI before the run
};

// Runs the request in whatever role this process has, decided once from its environment:
//  - a worker (a launcher's variables are set): joins the group and trains;
//  - one worker alone (--nproc-per-node 1, one node): trains in this process;
//  - otherwise the launcher: checks the configuration, makes the run directory (node 0), starts
//    this node's workers and waits for them.
// Returns the exit code: 0, 128 + a signal that stopped the run, or a failed worker's code. Bad
// input throws UserError before anything is written; runtime failures throw other exceptions.
int runExperiment(const ExperimentRequest& request);

}  // namespace gcrun::experiments
