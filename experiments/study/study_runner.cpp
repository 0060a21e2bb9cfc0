#include "experiments/study/study_runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <optional>
#include <stdexcept>

#include <spdlog/fmt/fmt.h>

#include "experiments/study/slurm_script.h"
#include "experiments/study/study_prediction.h"
#include "experiments/study/study_schedule.h"
#include "hyperparams/base/errors.h"
#include "outputs/report/report.h"
#include "outputs/run_directory.h"
#include "outputs/study_directory.h"

namespace gcrun::experiments {
namespace {

namespace fs = std::filesystem;
using outputs::RunStatus;
using outputs::StudyDirectory;
using outputs::StudyRecord;
namespace run_files = outputs::run_files;

constexpr auto kLockWait = std::chrono::seconds(120);

// --- plan: the runs and what each needs next ---

StudyRecord recordOf(const StudySpec& spec, const std::vector<StudyRun>& plan) {
  StudyRecord record{spec.name, spec.description, {}};
  for (const auto& run : plan) {
    outputs::StudyRunRecord line;
    line.index = run.index;
    line.config = run.config;
    line.seed = run.seed;
    line.name = run.dir_name;
    record.runs.push_back(std::move(line));
  }
  return record;
}

// What `run` needs next, from runs/<run>: nothing (it completed), a resume from its checkpoint
// (it was interrupted, or its process died), or a fresh start (none there; or it failed, or died
// before its first checkpoint, and its directory is cleared). Only a directory the study made, or
// a run of this study with the configuration the study now asks for, is ever taken: anything else
// there is a UserError naming it.
Next nextFor(const StudySpec& spec, const StudyRun& run, const outputs::StudyRunRecord& line,
             const StudyDirectory& study) {
  if (!study.hasRun(run.dir_name)) return Next::fresh;
  const std::string dir = study.runPath(run.dir_name);
  if (!study.hasRunDirectory(run.dir_name)) {
    throw UserError("study: " + dir + " is not a directory; remove it or use another --output-dir than " +
                    study.path());
  }
  const auto info = study.runInfo(run.dir_name);
  std::optional<RunStatus> status;
  if (info) status = info->status;
  // A refused run wrote no config.yaml; its marker says whose it is.
  if (!status || status == RunStatus::refused) {
    if (!study.isRunOf(spec.name, line)) {
      throw UserError("study: " + dir + " holds files but no run of this study (no run.json, no " +
                      run_files::kStudyRunMarker + " of this study); move them away or use another --output-dir than " +
                      study.path());
    }
  } else if (const auto written = study.runConfig(run.dir_name); !written || !asksFor(run, *written)) {
    throw UserError("study: " + dir +
                    " was run with other settings than the study now asks for; "
                    "use another --output-dir than " +
                    study.path() + " (or remove that run)");
  }
  if (status == RunStatus::completed) return Next::skip;
  if ((status == RunStatus::interrupted || status == RunStatus::running) && study.hasCheckpoint(run.dir_name)) {
    return Next::resume;
  }
  study.removeRun(run.dir_name);  // failed, or died before its first checkpoint: from the start
  return Next::fresh;
}

// The runs this process is to start (just `only`, in a Slurm array task), each judged by nextFor;
// those already completed are marked so in `record`.
std::deque<ScheduledRun> runsToDo(const StudySpec& spec, const std::vector<StudyRun>& plan,
                                  const std::optional<size_t>& only, const StudyDirectory& study, StudyRecord& record) {
  std::deque<ScheduledRun> todo;
  for (const auto& run : plan) {
    if (only && run.index != *only) continue;
    const Next next = nextFor(spec, run, record.runs[run.index], study);
    if (next == Next::skip) {
      record.runs[run.index].status = RunStatus::completed;
    } else {
      todo.push_back({run.index, next});
    }
  }
  return todo;
}

void printPlan(const std::vector<StudyRun>& plan) {
  for (const auto& run : plan) {
    std::string sets;
    for (const auto& a : run.assignments) sets += " --set " + a;
    std::printf("%3zu  %-37s %s%s\n", run.index, outputs::study_files::runDir(run.dir_name).c_str(), run.preset.c_str(),
                sets.c_str());
  }
}

// DIR/slurm.sbatch, and study.json with the plan, all pending: `gcrun study --status DIR` follows
// the array's runs from it. The script is checked before anything is written.
int writeSlurmJob(const StudySpec& spec, const StudyOptions& options, const std::string& dir,
                  const std::vector<StudyRun>& plan) {
  const std::string script = slurmScript(spec, options, dir, plan.size());
  const auto study = StudyDirectory::open(dir, false);
  study.writeSlurmScript(script);
  study.writeRecord(recordOf(spec, plan));
  std::printf("study %s: wrote %s (%zu array tasks)\n", spec.name.c_str(),
              study.pathOf(outputs::study_files::kSlurmScript).c_str(), plan.size());
  return 0;
}

// --- report ---

// The report of the runs that have started, or failed before they could, in the study's order,
// with the study's prediction when it asks for one. A report that cannot be written is said, not
// thrown: the runs' own files stand.
void writeStudyReport(const StudySpec& spec, const StudyDirectory& study, const std::vector<StudyRun>& plan,
                      const StudyRecord& record) {
  try {
    std::vector<outputs::RunData> runs;
    std::vector<std::string> skipped;
    for (const auto& run : plan) {
      const std::string run_dir = study.runPath(run.dir_name);
      const auto& line = record.runs[run.index];
      const auto info = study.runInfo(run.dir_name);
      const bool started = info && info->status != RunStatus::refused;
      if (started || (!info && fs::is_regular_file(run_dir + "/" + run_files::kInfo))) {
        if (auto loaded = outputs::loadRunOrSkip(run_dir, skipped)) runs.push_back(std::move(*loaded));
      } else if (line.status == RunStatus::failed || line.status == RunStatus::refused) {
        runs.push_back(outputs::runThatDidNotStart(run_dir, run.config_yaml, line.status, line.error));
      }
    }
    outputs::ReportOptions options{study.path(), outputs::reportFormats(), spec.description, skipped};
    if (spec.predict) addPrediction(*spec.predict, study, runs, options);
    const auto result = outputs::writeReport(runs, options);
    if (!result.note.empty()) std::printf("study: %s\n", result.note.c_str());
    std::printf("study %s: report in %s/%s\n", spec.name.c_str(), study.path().c_str(),
                outputs::report_files::kMarkdown);
  } catch (const std::exception& e) {
    std::printf("study: the report could not be written: %s\n", e.what());
  }
}

// 0 when every run completed; else a std::runtime_error naming the runs that did not.
int resultOf(const StudyRecord& record, const StudyDirectory& study) {
  std::string failed;
  size_t failures = 0;
  for (const auto& line : record.runs) {
    if (line.status == RunStatus::completed) continue;
    ++failures;
    failed += (failed.empty() ? "" : ", ") + line.name;
  }
  if (failures == 0) return 0;
  throw std::runtime_error(fmt::format("study: {} of {} runs did not complete: {} (see {})", failures,
                                       record.runs.size(), failed, study.pathOf(outputs::study_files::kRecord)));
}

// Holds study.lock for this process and its runs, waiting for a study that holds it.
files::UniqueFd lockStudy(const StudyDirectory& study) {
  return study.lock(kLockWait, [&] {
    std::printf("study: waiting for the study that holds %s\n", study.pathOf(outputs::study_files::kLock).c_str());
  });
}

// Schedules `todo`, then reports the study (not an array task's); returns the signal that stopped
// it, 0 for none. The study's own failure (a log it may not write, a child it could not start)
// still reports the runs that ended before it, then propagates.
int scheduleThenReport(const StudySchedule& schedule, std::deque<ScheduledRun> todo, StudyRecord& record) {
  const bool reports = schedule.whole;
  int stop_signal = 0;
  try {
    stop_signal = runSchedule(schedule, std::move(todo), record);
  } catch (...) {
    const bool ended = std::any_of(record.runs.begin(), record.runs.end(), [](const auto& line) {
      return line.attempts > 0 && line.status != RunStatus::running;
    });
    if (reports && ended) writeStudyReport(schedule.spec, schedule.study, schedule.plan, record);
    throw;
  }
  if (reports) writeStudyReport(schedule.spec, schedule.study, schedule.plan, record);
  return stop_signal;
}

}  // namespace

int runStudy(const StudySpec& spec, const StudyOptions& given) {
  StudyOptions options = given;
  if (options.nproc_per_node == 0) options.nproc_per_node = spec.processes;
  const auto plan = planStudy(spec, options.assignments);
  const std::string dir =
      options.output_dir.empty() ? std::string(outputs::kDefaultRunsFolder) + "/" + spec.name : options.output_dir;
  if (options.dry_run) {
    std::printf("study %s: %zu runs in %s\n", spec.name.c_str(), plan.size(), dir.c_str());
    printPlan(plan);
    return 0;
  }
  if (options.only && *options.only >= plan.size()) {
    throw UserError("--only: " + std::to_string(*options.only) + " is not below the study's " +
                    std::to_string(plan.size()) + " runs");
  }
  if (options.slurm) return writeSlurmJob(spec, options, dir, plan);

  // Plan: what each run needs next. Array tasks run side by side in one directory: each looks
  // after its own run only, and leaves study.json and the report to `gcrun study --status` and
  // `gcrun report`.
  const auto study = StudyDirectory::open(dir, true);
  const bool whole = !options.only;
  const auto lock = whole ? lockStudy(study) : files::UniqueFd();
  auto record = recordOf(spec, plan);
  auto todo = runsToDo(spec, plan, options.only, study, record);
  if (whole) study.writeRecord(record);
  std::printf("study %s: %zu runs, %zu to do, in %s\n", spec.name.c_str(), plan.size(), todo.size(), dir.c_str());
  std::fflush(stdout);

  // Schedule, then report.
  const StudySchedule schedule{spec, plan, options, study, lock.get(), whole};
  const int stop_signal = scheduleThenReport(schedule, std::move(todo), record);
  if (stop_signal != 0) return 128 + stop_signal;
  if (!whole) return record.runs[*options.only].exit_code;
  return resultOf(record, study);
}

}  // namespace gcrun::experiments
