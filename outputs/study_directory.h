#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "outputs/files/safe_files.h"
#include "outputs/run_info.h"
#include "outputs/run_status.h"

namespace gcrun::outputs {

// The files of a study directory, each name spelled here only (docs/architecture.md, "The study
// directory"). Each run's own files are a run directory's (run_directory.h); the report at the top
// (report.md, report.csv, report.html, plots/) is outputs::writeReport's, as in any report folder.
namespace study_files {
inline constexpr char kRecord[] = "study.json";         // StudyRecord: the plan and how each run stands
inline constexpr char kLock[] = "study.lock";           // held by the study running here (flock, its pid)
inline constexpr char kRuns[] = "runs";                 // runs/<run>/: the run directories
inline constexpr char kLogs[] = "logs";                 // logs/<run>.log: each run's console output
inline constexpr char kConfigs[] = "configs";           // configs/<run>.yaml: what a fresh run starts from
inline constexpr char kSlurmScript[] = "slurm.sbatch";  // `--slurm`'s job array
inline constexpr char kSlurmLog[] = "slurm-%A_%a.log";  // in logs/: each array task's output, as sbatch names it
inline constexpr char kPredict[] = "predict";           // gcrun predict's files, for a study with `predict:`
std::string runDir(const std::string& run);             // runs/<run>, from the study directory
std::string logFile(const std::string& run);            // <run>.log
std::string configFile(const std::string& run);         // <run>.yaml
}  // namespace study_files

// One run's line in study.json: the plan's run and how it stands, as the study process last
// recorded it (a run under Slurm records only its own run.json).
struct StudyRunRecord {
  size_t index = 0;    // in the plan
  std::string config;  // the configuration's name
  int64_t seed = 0;
  std::string name;  // its directory below runs/, <config>-seed<k>; the file's "dir" is "runs/<name>"
  RunStatus status = RunStatus::pending;
  int exit_code = 0;   // of its last process
  std::string error;   // why it failed or was refused
  int attempts = 0;    // processes started for it
  double seconds = 0;  // how long a finished run took; a running one so far
};

// study.json: the study and each run of its plan, in order.
struct StudyRecord {
  std::string study;
  std::string description;
  std::vector<StudyRunRecord> runs;
};

// About 30 years: more than any run, and few enough digits to print.
inline constexpr double kMaxRunSeconds = 1e9;

// study.json's text for `record`.
std::string studyRecordJson(const StudyRecord& record);

// study.json of the study directory `dir`, which may come from someone else: read bounded
// (files::kMaxRecordBytes), each run once. A missing or non-regular file, one that is not a study's
// (no "runs" array), one listing more than `max_runs` runs, or a run's seconds outside 0 to
// kMaxRunSeconds is a UserError naming the file. Left out: entries that are not objects, runs
// whose "dir" is not runs/<name> (it would point outside the study), and a run named again. A field
// missing or of another type keeps StudyRunRecord's default; so does a status that is none of
// RunStatus's words.
StudyRecord readStudyRecord(const std::string& dir, uint64_t max_runs);

// What runs/<run>/run.json in the study directory `dir` records; nothing when there is none, or
// none that is gcrun's (a FIFO, a huge file, not JSON).
std::optional<RunInfo> readStudyRunInfo(const std::string& dir, const std::string& run);

// A study directory opened for a study to run in: where each of its files is, the lock, study.json
// and what a study asks of its runs' directories. Below the directory the user named, everything
// is written through files::Directory descriptors: a symlink planted at runs/, logs/, configs/, a
// log or study.lock is refused (a UserError naming it), one at study.json or slurm.sbatch is
// replaced, never written through; every read is bounded (docs/security.md).
class StudyDirectory {
 public:
  // `path` with runs/ and logs/ in it, each created when missing, and configs/ too `to_run` (a
  // Slurm script's study runs nothing here itself).
  static StudyDirectory open(const std::string& path, bool to_run);

  const std::string& path() const { return root_.path(); }
  std::string pathOf(std::string_view name) const { return root_.pathOf(std::string(name)); }
  std::string runPath(const std::string& run) const { return runs_.pathOf(run); }
  std::string configPath(const std::string& run) const;
  std::string logPath(const std::string& run) const { return logs_.pathOf(study_files::logFile(run)); }
  std::string predictPath() const { return pathOf(study_files::kPredict); }

  void writeRecord(const StudyRecord& record) const;  // study.json, replaced whole
  void writeSlurmScript(std::string_view script) const;

  // Holds study.lock (flock) for as long as the descriptor lives, in this process and the runs that
  // inherit it. A study that holds it is waited for up to `wait` (`waiting` is called once, when
  // the wait begins); after that a UserError naming the holder's pid.
  files::UniqueFd lock(std::chrono::seconds wait, const std::function<void()>& waiting) const;

  // --- runs/<run> ---
  bool hasRun(const std::string& run) const { return runs_.has(run); }  // in any form
  bool hasRunDirectory(const std::string& run) const { return runs_.hasDirectory(run); }
  std::optional<RunInfo> runInfo(const std::string& run) const { return readStudyRunInfo(path(), run); }
  // Its config.yaml, if that is a regular file of at most files::kMaxConfigBytes.
  std::optional<std::string> runConfig(const std::string& run) const;
  // Whether it holds a complete checkpoint (checkpoints/manifest.json) to resume from.
  bool hasCheckpoint(const std::string& run) const;
  // Creates it and writes the marker (run_files::kStudyRunMarker) naming `study`, the run and its
  // configuration, before the run starts there: only a directory holding this marker, or a run
  // of this study, is ever cleared, since anything else at runs/<run> may be someone's data.
  void markRun(const std::string& study, const StudyRunRecord& run) const;
  // Whether runs/<run.name> is `study`'s directory for `run`: it holds markRun's marker, or nothing.
  bool isRunOf(const std::string& study, const StudyRunRecord& run) const;
  void removeRun(const std::string& run) const { runs_.removeTree(run); }

  // configs/<run>.yaml, replaced whole.
  void writeRunConfig(const std::string& run, std::string_view yaml) const;
  // logs/<run>.log, opened for appending.
  files::UniqueFd openLog(const std::string& run) const { return logs_.openForAppend(study_files::logFile(run)); }
  // The last `bytes` (at most) of logs/<run>.log; empty when it cannot be read.
  std::string logTail(const std::string& run, size_t bytes) const;

 private:
  StudyDirectory(files::Directory root, files::Directory runs, files::Directory logs,
                 std::optional<files::Directory> configs)
      : root_(std::move(root)), runs_(std::move(runs)), logs_(std::move(logs)), configs_(std::move(configs)) {}

  files::Directory root_, runs_, logs_;
  std::optional<files::Directory> configs_;
};

}  // namespace gcrun::outputs
