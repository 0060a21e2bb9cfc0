#pragma once

#include <optional>
#include <string>
#include <vector>

#include "outputs/study_directory.h"

namespace gcrun::experiments {

// Where a study stands, from its files alone: DIR/study.json (the plan, and the outcomes the
// study process recorded) and each run's run.json (which a run under Slurm updates itself), so
// that a study running elsewhere can be followed without starting anything.

struct StudyProgress {
  size_t total = 0, completed = 0, failed = 0, running = 0, left = 0;  // failed: failed, interrupted, refused
  std::optional<double> mean_seconds;                                  // of the completed runs
  std::optional<double> eta_seconds;  // the runs not done, `parallel` at a time, at the mean
};

// Every run of the study in `dir` as study.json records it (outputs::readStudyRecord), each
// brought up to date from its own run.json, the newer record: status, error, and its time from
// run.json's start (and end). Errors are clipped to one message's length. A directory without
// study.json (or whose study.json is not the study's) is a UserError naming it.
std::vector<outputs::StudyRunRecord> readStudyState(const std::string& dir);

StudyProgress progressOf(const std::vector<outputs::StudyRunRecord>& runs, int parallel);

// "3 of 7 done, 1 failed, 1 running, 2 left; ETA 4 min (mean 80 s a run, 1 at a time)".
std::string progressLine(const StudyProgress& progress, int parallel);

// `gcrun study --status DIR`: one line per run, then the progress line (at the runs now running,
// at least one at a time). Names from the files are printed one line each.
std::string studyStatusText(const std::string& dir);

}  // namespace gcrun::experiments
