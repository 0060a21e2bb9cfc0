#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hyperparams/base/baseline.h"
#include "hyperparams/base/sync_schedule.h"
#include "outputs/layers/layer_stats.h"
#include "outputs/run_status.h"

namespace gcrun::outputs {

// One point of a run's curve: at the end of an epoch (or the last step of a shortened one).
struct EpochPoint {
  int64_t step = 0;      // steps trained so far
  double epoch = 0;      // fractional, as metrics.jsonl has it
  double metric = 0;     // the run's final metric (RunData::metric) at that point
  double mib = 0;        // MiB sent by one worker so far
  double elapsed_s = 0;  // wall-clock time trained so far
};

// The per-step training loss, averaged over the workers and the steps of its window.
struct LossPoint {
  int64_t step = 0;
  double loss = 0;
};

// What a report needs of one run directory (one with a run.json), read from its run.json,
// config.yaml, timer_summary.json and metrics.jsonl. Missing or unreadable files leave the fields
// empty rather than fail: a run that is still going has only some of them.
struct RunData {
  std::string dir;
  std::string name;        // the directory's name without its -seed<k> suffix
  std::string config_key;  // the resolved configuration without its seed: runs that share it differ only by seed
  std::map<std::string, std::string> settings;  // the configuration, flattened: "reducer.rank" -> "2"
  Baseline baseline = Baseline::none;           // the reducer's, as run.json records it
  // The strategy's schedule as run.json records it, or why that is no schedule (RunInfo's).
  std::optional<SyncSchedule> schedule;
  std::string schedule_problem;
  int64_t seed = 0;
  // run.json's; nothing when run.json is unreadable (`unreadable`) or holds no status gcrun writes.
  std::optional<RunStatus> status;
  bool unreadable = false;  // run.json is not a JSON object
  std::string error;
  std::string experiment;
  bool synthetic = false;
  int world_size = 1;
  int simulated_workers = 1;        // per process; their compute ran in turn
  double compute_per_batch_ms = 0;  // with simulated workers: one logical worker's forward and backward
  std::string metric;               // the final metric reported: paper.metric, else test.accuracy, else ...
  std::optional<double> final_value;
  double mib_per_epoch = 0;                      // per worker
  double compression = 0;                        // float32 all-reduce bits / bits sent; 0 when nothing was sent
  std::optional<double> time_per_batch_ms;       // median
  std::optional<double> mean_time_per_batch_ms;  // mean: a run whose steps differ by its sync schedule
  std::optional<double> paper_value;
  std::string paper_source;
  std::optional<double> paper_time_per_batch_ms;  // at the paper's 16 workers
  std::vector<EpochPoint> epochs;
  std::vector<LossPoint> losses;
  std::vector<LayerSummary> layers;  // from layers.csv, when output.layer_stats_every_steps was on
};

// The run's status as a report shows it: its word, "unreadable" or "unknown".
std::string statusLabel(const RunData& run);

// Every run directory at or below each of `paths` (a directory holding run.json), sorted by path.
// A path that is not a directory is a UserError naming it; what cannot be searched (a symlink
// loop) is left out with a line "path: why" in `skipped`.
std::vector<std::string> findRunDirectories(const std::vector<std::string>& paths, std::vector<std::string>& skipped);

// The run in `dir`. Its files are read only if they are regular files within files::kMax*Bytes and
// their YAML aliases expand to a bounded number of values; otherwise a UserError naming the file.
// Numbers that are not finite doubles (NaN, 1e400) are missing, not 0. `metric` ("test.loss")
// chooses the curve's metric instead of the run's final one.
RunData loadRun(const std::string& dir, const std::string& metric = "");

// loadRun(dir), or nothing with a line "dir: why" added to `skipped` when the run cannot be read
// safely: a report leaves such a run out rather than failing the others.
std::optional<RunData> loadRunOrSkip(const std::string& dir, std::vector<std::string>& skipped,
                                     const std::string& metric = "");

struct LoadedRuns {
  std::vector<RunData> runs;
  std::vector<std::string> skipped;  // "path: why" for each run or path left out
  size_t found = 0;                  // run directories found, those skipped included
};

// The runs below `paths` (findRunDirectories), each through loadRunOrSkip.
LoadedRuns loadRuns(const std::vector<std::string>& paths, const std::string& metric = "");

// A run that never wrote its directory (refused input, say): what its configuration says, and its
// status and error as whoever started it recorded them.
RunData runThatDidNotStart(const std::string& dir, const std::string& config_yaml, RunStatus status,
                           const std::string& error);

}  // namespace gcrun::outputs
