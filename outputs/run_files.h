#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace gcrun::outputs {

// Creates the directory a run writes into and returns its path. `requested` empty: a new folder
// outputs/<experiment>-<YYYYmmdd-HHMMSS>[-N] under the working directory. `requested` given: it
// must not exist or be empty; an existing non-empty directory is a UserError (runs are never
// overwritten silently).
std::string createRunDirectory(const std::string& requested, const std::string& experiment);

// The file `gcrun study` writes into a run directory it creates before starting the run there,
// so that it clears only directories of its own (experiments/study/study_runner.cpp). A requested
// directory that holds nothing else counts as empty.
inline constexpr char kStudyRunMarker[] = ".gcrun-study-run";

// Writes `contents` to `path` through a temporary file, fsync and rename (files::Directory), so
// readers never see a half-written file and a symlink at `path` is replaced, never followed.
void writeFileAtomically(const std::string& path, std::string_view contents);

// A preset's published result next to this run's (run.json's "paper" object).
struct PaperComparison {
  std::string metric;  // empty: the preset reproduces no published number, no "paper" object
  std::string source;
  // "value", "run_value", "difference" (run - paper), "data_per_epoch_mb", "run_data_per_epoch_mb",
  // "time_per_batch_ms", "run_time_per_batch_ms"; entries the run did not measure are left out.
  std::map<std::string, double> numbers;
};

// What run.json records about a run.
struct RunInfo {
  std::string experiment;
  std::string gcrun_version;
  std::string torch_version;
  int world_size = 1;     // workers, simulated ones included
  int processes = 1;
  int simulated_workers = 1;  // logical workers per process
  double compute_per_batch_ms = 0;  // with simulated workers: one logical worker's forward and backward
  std::string backend;
  std::string device;
  int64_t num_parameters = 0;
  int64_t steps = 0;
  double epochs_done = 0;
  uint64_t bits_sent = 0;  // per worker
  std::vector<double> peak_rss_mib;  // each rank's peak resident memory, in rank order
  bool synthetic_data = false;
  std::string status;      // "running", "completed", "failed"
  std::string error;       // the failure, when status is "failed"
  std::string start_time;  // ISO 8601, UTC
  std::string end_time;
  std::map<std::string, double> final_metrics;  // "test.accuracy" -> value, ...
  PaperComparison paper;
};
std::string runInfoJson(const RunInfo& info);

// Current time as ISO 8601 in UTC, e.g. 2026-11-30T01:02:03Z.
std::string isoTimeNow();

}  // namespace gcrun::outputs
