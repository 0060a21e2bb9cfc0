#pragma once

#include <string>
#include <vector>

#include "experiments/launch/launcher.h"

namespace gcrun::experiments {

// One `gcrun experiment` as the command line (or a study) asks for it; experiments/setup/command_line.h
// parses it and writes it back out as arguments.
struct ExperimentRequest {
  std::string preset;                    // e.g. fashion-powersgd-rank2
  std::string config_file;               // YAML settings over the preset; empty: none
  std::vector<std::string> assignments;  // key=value, applied last
  std::string output_dir;                // empty: a new folder under runs/
  std::string resume_dir;                // not empty: continue this run from its latest checkpoint
  launch::LaunchOptions launch;          // this machine's part when gcrun starts the workers
  std::vector<std::string> plugins;      // --plugin libraries, loaded by the CLI before the run
  // Set only in a worker of gcrun's launcher: the file in which the launcher wrote what it resolved
  // (resolvedFileText), which the worker starts from instead of the settings above.
  std::string resolved_file;
};

}  // namespace gcrun::experiments
