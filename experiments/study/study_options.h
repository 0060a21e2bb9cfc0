#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace gcrun::experiments {

// How `gcrun study` runs a study (its command line, study_command_line.h): what the runner, its
// schedule and the Slurm script read.
struct StudyOptions {
  std::string output_dir;                // empty: runs/<study name>, so that the same command resumes
  std::vector<std::string> assignments;  // --set, on top of the study's own
  int nproc_per_node = 0;                // workers per run; 0: the study's `processes`
  int jobs = 1;                          // runs at once on this machine; they split its cores
  bool dry_run = false;                  // print the plan only
  bool slurm = false;                    // write DIR/slurm.sbatch (a job array) instead of running
  std::optional<size_t> only;            // run just this index of the plan (a Slurm array task)
  std::vector<std::string> plugins;      // passed on to every run
};

}  // namespace gcrun::experiments
