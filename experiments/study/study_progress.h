#pragma once

#include <optional>
#include <string>
#include <vector>

#include "outputs/run_info.h"

namespace gcrun::experiments {

// Where a study stands, from its files alone: DIR/study.json (the plan, and the outcomes the
// study process recorded) and each run's run.json (which a run under Slurm updates itself), so
// that a study running elsewhere can be followed without starting anything.
struct StudyRunState {
  std::string dir;     // "runs/<config>-seed<k>"
  std::string status;  // pending, running, completed, failed, interrupted, refused
  double seconds = 0;  // how long a finished run took; a running one so far
  std::string error;
};

struct StudyProgress {
  size_t total = 0, completed = 0, failed = 0, running = 0, left = 0;  // failed: failed, interrupted, refused
  std::optional<double> mean_seconds;                                  // of the completed runs
  std::optional<double> eta_seconds;  // the runs not done, `parallel` at a time, at the mean
};

// What the run in `dir` recorded in its run.json; nothing when it wrote none, or none that is
// gcrun's (a FIFO, a huge file, not JSON).
std::optional<outputs::RunInfo> runInfoOf(const std::string& dir);

// The state of every run of the study in `dir`; a directory without study.json (or whose
// study.json is not the study's) is a UserError naming it.
std::vector<StudyRunState> readStudyState(const std::string& dir);

StudyProgress progressOf(const std::vector<StudyRunState>& runs, int parallel);

// "3 of 7 done, 1 failed, 1 running, 2 left; ETA 4 min (mean 80 s a run, 1 at a time)".
std::string progressLine(const StudyProgress& progress, int parallel);

// `gcrun study --status DIR`: one line per run, then the progress line (at the runs now running,
// at least one at a time). Names from the files are printed one line each.
std::string studyStatusText(const std::string& dir);

}  // namespace gcrun::experiments
