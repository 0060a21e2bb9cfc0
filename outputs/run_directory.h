#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "outputs/run_info.h"

namespace gcrun::outputs {

// The files of a run directory, each name spelled here only (docs/outputs.md, "What a run leaves behind").
namespace run_files {
inline constexpr char kConfig[] = "config.yaml";               // the resolved settings
inline constexpr char kInfo[] = "run.json";                    // RunInfo
inline constexpr char kTimerSummary[] = "timer_summary.json";  // Timer::summaryJson
inline constexpr char kMetrics[] = "metrics.jsonl";            // the jsonl sink's events
inline constexpr char kEpochs[] = "epochs.csv";                // the csv sink's rows
inline constexpr char kWorkers[] = "workers.json";             // the local launcher's workers
inline constexpr char kLock[] = ".gcrun.lock";                 // held by the gcrun using the run
inline constexpr char kCheckpoints[] = "checkpoints";          // CheckpointStore's folder
inline constexpr char kManifest[] = "manifest.json";           // in checkpoints/, written last
inline constexpr char kTensorboard[] = "tb";                   // the tensorboard sink's event files
inline constexpr char kLayers[] = "layers.csv";                // output.layer_stats_every_steps's rows
// The file `gcrun study` writes into a run directory it creates before starting the run there,
// so that it clears only directories of its own (StudyDirectory::markRun, study_directory.h). A
// requested directory that holds nothing else counts as empty.
inline constexpr char kStudyRunMarker[] = ".gcrun-study-run";
// rank-<r>.log: each rank's log.
std::string rankLog(int rank);
// `gcrun bench network`'s default --output, in the working directory (no run directory).
inline constexpr char kNetworkProfile[] = "network.yaml";
// trace-rank<r>.json: process rank r's step timeline (output.trace; outputs/trace/trace_file.h).
std::string traceFile(int rank);
}  // namespace run_files

// The default parent of new run directories, below the working directory.
inline constexpr char kDefaultRunsFolder[] = "runs";

// One run's directory: where its files are, how it is created and locked, and its run.json.
class RunDirectory {
 public:
  // An existing run directory (a resumed run's, or one the launcher created).
  explicit RunDirectory(std::string path) : path_(std::move(path)) {}

  // Creates the directory a run writes into. `requested` empty: a new folder
  // runs/<experiment>-<YYYYmmdd-HHMMSS>[-N] under the working directory. `requested` given: it
  // must not exist or hold no run yet: nothing but a run directory's own files from before a run
  // starts (the study's marker, workers.json, the lock, rank logs: a launch stopped before its
  // run began); any other file is a UserError (runs are never overwritten silently).
  static RunDirectory create(const std::string& requested, const std::string& experiment);

  // Records in `requested`'s run.json a run that bad input stopped before training: status
  // "refused" and the error in `info`. Writes only where a run could start: a missing directory
  // (created) or one that holds no run.json and nothing but a run directory's own files (its logs,
  // workers.json, the lock, the study's marker), so a refusal never lands in someone's data.
  // Returns whether it wrote; a failure to write is no error of its own (the refusal stands).
  static bool recordRefusal(const std::string& requested, const RunInfo& info);

  const std::string& path() const { return path_; }
  std::string pathOf(std::string_view name) const { return path_ + "/" + std::string(name); }

  // Holds run_files::kLock (flock) for the rest of this process's life, and so for the workers it
  // starts, which inherit it: a second gcrun on the same directory is a UserError naming the pid
  // that holds it (the message leaves the directory to the caller). The kernel drops the lock when
  // its holders exit.
  void lockForProcess() const;

  // Refuses what a resumed run would refuse once it writes: a symlink or foreign file at the lock,
  // a rank log of `world_size` ranks, the file of a built-in sink in `sinks`, layers.csv (with
  // `layer_stats`), or a symlink or file at tb/ (with the tensorboard sink) or checkpoints/. Checked
  // before the lock is taken or a log written, so that such a refusal leaves the directory as it was.
  void checkResumable(const std::vector<std::string>& sinks, bool layer_stats, int world_size) const;

  // run.json: nothing when it is missing or not a JSON object (a run still writing it, someone
  // else's file); a UserError when it is not a regular file within files::kMaxRecordBytes.
  std::optional<RunInfo> readInfo() const;
  void writeInfo(const RunInfo& info) const;
  // Any file of the run, written atomically (writeFileAtomically).
  void write(std::string_view name, std::string_view contents) const;

 private:
  std::string path_;
};

// Writes `contents` to `path` through a temporary file, fsync and rename (files::Directory), so
// readers never see a half-written file and a symlink at `path` is replaced, never followed.
void writeFileAtomically(const std::string& path, std::string_view contents);

}  // namespace gcrun::outputs
