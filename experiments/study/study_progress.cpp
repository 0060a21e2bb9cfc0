#include "experiments/study/study_progress.h"

#include <algorithm>
#include <climits>
#include <ctime>
#include <filesystem>
#include <set>

#include <spdlog/fmt/fmt.h>

#include "experiments/study/study.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"
#include "hyperparams/base/units.h"
#include "outputs/files/safe_files.h"
#include "outputs/json.h"
#include "outputs/json_document.h"
#include "outputs/report/safe_text.h"
#include "outputs/run_directory.h"
#include "outputs/run_info.h"

namespace gcrun::experiments {
namespace {

namespace run_status = outputs::run_status;

// Seconds since the epoch of an ISO 8601 UTC time as run.json writes it ("2026-12-01T14:05:09Z");
// nothing for another text or a year outside 1970-2999, which no run of gcrun's has.
std::optional<double> secondsOf(const std::string& iso) {
  std::tm tm{};
  if (iso.size() < 19 || !strptime(iso.c_str(), "%Y-%m-%dT%H:%M:%S", &tm)) return std::nullopt;
  if (tm.tm_year < 70 || tm.tm_year > 1099) return std::nullopt;
  return static_cast<double>(timegm(&tm));
}

// A status is one word of run_status; someone else's file may hold anything.
constexpr size_t kMaxStatusChars = 20;
// A run's error as --status lists it: one line, clipped, however long the run.json's is.
constexpr size_t kMaxErrorChars = 300;
// "runs/" and a file name.
constexpr size_t kMaxRunDirChars = 5 + NAME_MAX;
// About 30 years: more than any run, and few enough digits to print.
constexpr double kMaxRunSeconds = 1e9;

bool isFailure(const std::string& status) {
  return status == run_status::kFailed || status == run_status::kInterrupted || status == run_status::kRefused;
}

// What study.json recorded of run `index`; a time past kMaxRunSeconds is refused, naming the file.
StudyRunState recordedState(const outputs::Json& entry, const std::string& file, size_t index) {
  StudyRunState state;
  state.dir = outputs::stringOr(entry, "dir", "");
  state.status = clipForMessage(outputs::stringOr(entry, "status", "pending"), kMaxStatusChars);
  state.seconds = outputs::numberAt(entry, "seconds").value_or(0);
  if (state.seconds < 0 || state.seconds > kMaxRunSeconds) {
    throw UserError("study --status: " + file + ": runs[" + std::to_string(index) + "].seconds is " +
                    outputs::jsonNumber(state.seconds) + "; a run's time is 0 to " +
                    outputs::jsonNumber(kMaxRunSeconds) + " s");
  }
  state.error = clipForMessage(outputs::stringOr(entry, "error", ""), kMaxErrorChars);
  return state;
}

// The run's own record is the newer one: a Slurm task or a run still going writes it.
void updateFromRunInfo(const std::string& run_dir, StudyRunState& state) {
  const auto info = runInfoOf(run_dir);
  if (!info) return;
  if (!info->status.empty()) state.status = clipForMessage(info->status, kMaxStatusChars);
  if (!info->error.empty()) state.error = clipForMessage(info->error, kMaxErrorChars);
  const auto start = secondsOf(info->start_time);
  const auto end = secondsOf(info->end_time);
  if (start && end && state.status != run_status::kRunning) state.seconds = *end - *start;
  if (start && state.status == run_status::kRunning) state.seconds = units::unixSeconds() - *start;
}

}  // namespace

std::optional<outputs::RunInfo> runInfoOf(const std::string& dir) {
  try {
    return outputs::RunDirectory(dir).readInfo();
  } catch (const UserError&) {
    return std::nullopt;
  }
}

std::vector<StudyRunState> readStudyState(const std::string& dir) {
  const std::string file = dir + "/study.json";
  if (const auto why = files::notRegularFileReason(file); !why.empty()) {
    throw UserError("study --status: " + file + ": " + why + "; give the directory a study runs in");
  }
  std::string why;
  const auto json = outputs::parseJson(files::readBoundedFile(file, files::kMaxRecordBytes), &why);
  const auto* runs = json ? outputs::memberOf(*json, "runs") : nullptr;
  if (!runs || !runs->is_array()) {
    throw UserError("study --status: " + file + " is not a study's study.json" + (why.empty() ? "" : " (" + why + ")"));
  }
  if (runs->size() > kMaxStudyRuns) {
    throw UserError("study --status: " + file + " lists " + std::to_string(runs->size()) + " runs, more than the " +
                    std::to_string(kMaxStudyRuns) + " a study may have");
  }
  std::vector<StudyRunState> states;
  std::set<std::string> seen;
  for (size_t i = 0; i < runs->size(); ++i) {
    const auto& entry = (*runs)[i];
    if (!entry.is_object()) continue;
    StudyRunState state = recordedState(entry, file, i);
    // Only runs/<name>: a study.json from someone else points nowhere outside the study. Each run
    // is read and listed once, however often the file names it.
    if (state.dir.rfind("runs/", 0) != 0 || state.dir.find("..") != std::string::npos) continue;
    if (state.dir.size() > kMaxRunDirChars) continue;
    if (!seen.insert(state.dir).second) continue;
    updateFromRunInfo(dir + "/" + state.dir, state);
    states.push_back(std::move(state));
  }
  return states;
}

StudyProgress progressOf(const std::vector<StudyRunState>& runs, int parallel) {
  StudyProgress progress;
  progress.total = runs.size();
  double completed_seconds = 0;
  size_t timed = 0;
  for (const auto& run : runs) {
    if (run.status == run_status::kCompleted) {
      ++progress.completed;
      if (run.seconds > 0) {
        completed_seconds += run.seconds;
        ++timed;
      }
    } else if (isFailure(run.status)) {
      ++progress.failed;
    } else if (run.status == run_status::kRunning) {
      ++progress.running;
    } else {
      ++progress.left;
    }
  }
  if (timed == 0) return progress;
  progress.mean_seconds = completed_seconds / static_cast<double>(timed);
  // The running runs are counted as half done: without their progress, the middle is the best guess.
  const double runs_to_go = static_cast<double>(progress.left) + 0.5 * static_cast<double>(progress.running);
  progress.eta_seconds = runs_to_go * *progress.mean_seconds / std::max(1, parallel);
  return progress;
}

std::string progressLine(const StudyProgress& progress, int parallel) {
  std::string line = fmt::format("{} of {} done, {} failed, {} running, {} left", progress.completed, progress.total,
                                 progress.failed, progress.running, progress.left);
  if (progress.eta_seconds && (progress.left > 0 || progress.running > 0)) {
    line += fmt::format("; ETA {} (mean {} a run, {} at a time)", units::elapsedText(*progress.eta_seconds),
                        units::elapsedText(*progress.mean_seconds), std::max(1, parallel));
  }
  return line;
}

std::string studyStatusText(const std::string& dir) {
  const auto runs = readStudyState(dir);
  std::string out;
  for (const auto& run : runs) {
    const bool timed = run.seconds > 0 && run.status != "pending";
    out +=
        fmt::format("{:<12} {:<40} {}{}\n", oneLine(run.status), oneLine(run.dir),
                    timed ? units::elapsedText(run.seconds) : "", run.error.empty() ? "" : "  " + oneLine(run.error));
  }
  const int parallel = std::max<int>(1, static_cast<int>(progressOf(runs, 1).running));
  return out + "study: " + progressLine(progressOf(runs, parallel), parallel) + "\n";
}

}  // namespace gcrun::experiments
