#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hyperparams/base/baseline.h"
#include "hyperparams/base/sync_schedule.h"
#include "outputs/run_status.h"

namespace gcrun::outputs {

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
  int world_size = 1;  // workers, simulated ones included
  int processes = 1;
  int simulated_workers = 1;        // logical workers per process
  double compute_per_batch_ms = 0;  // with simulated workers: one logical worker's forward and backward
  std::string backend;
  std::string device;
  int64_t num_parameters = 0;
  int64_t steps = 0;
  double epochs_done = 0;
  uint64_t bits_sent = 0;  // per worker
  // Syncs of the workers' models (strategies that sync models) and what each sent per worker,
  // on average; run.json's "syncs" and "bits_per_sync", left out when there were none.
  int64_t syncs = 0;
  double bits_per_sync = 0;
  std::vector<double> peak_rss_mib;  // each rank's peak resident memory, in rank order
  bool synthetic_data = false;
  // From its start (running) to its end; nothing when run.json holds no status, or a word that is
  // none of RunStatus's (a file gcrun did not write).
  std::optional<RunStatus> status;
  std::string error;       // the failure or refusal, when status is failed or refused
  std::string start_time;  // ISO 8601, UTC
  std::string end_time;
  // "test.accuracy" -> value, ...; NaN for a value that is no finite number (written as null).
  std::map<std::string, double> final_metrics;
  PaperComparison paper;
  // Where each configuration key's value came from (ExperimentConfig::sources); run.json's
  // "sources" object, left out when empty.
  std::map<std::string, std::string> sources;
  // The reducer's ReducerSpec::baseline, run.json's "baseline"; nothing when the run.json has none
  // (a refused run, or one written before gcrun recorded it).
  std::optional<Baseline> baseline;
  // The strategy's declared SyncSchedule, run.json's "schedule"; nothing when the run.json has none
  // (a run from before it was recorded, a strategy that declares none) or a bad one, whose fault
  // schedule_problem says ("schedule.every is 0; expected ...": for the reader to refuse, naming
  // the file).
  std::optional<SyncSchedule> schedule;
  std::string schedule_problem;
};

// run.json's text for `info`.
std::string runInfoJson(const RunInfo& info);
// The RunInfo in run.json's `text`, or nothing when it is not a JSON object. Fields that are
// missing or of another type keep RunInfo's defaults; numbers that are not finite are NaN in
// final_metrics and missing elsewhere.
std::optional<RunInfo> parseRunInfo(std::string_view text);

// Current time as ISO 8601 in UTC, e.g. 2026-11-30T01:02:03Z.
std::string isoTimeNow();

}  // namespace gcrun::outputs
