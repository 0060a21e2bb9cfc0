#include "experiments/study/study_progress.h"

#include <algorithm>
#include <ctime>

#include <spdlog/fmt/fmt.h>

#include "experiments/study/study.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"
#include "hyperparams/base/units.h"
#include "outputs/report/safe_text.h"

namespace gcrun::experiments {
namespace {

using outputs::RunStatus;

// Seconds since the epoch of an ISO 8601 UTC time as run.json writes it ("2026-12-01T14:05:09Z");
// nothing for another text or a year outside 1970-2999, which no run of gcrun's has.
std::optional<double> secondsOf(const std::string& iso) {
  std::tm tm{};
  if (iso.size() < 19 || !strptime(iso.c_str(), "%Y-%m-%dT%H:%M:%S", &tm)) return std::nullopt;
  if (tm.tm_year < 70 || tm.tm_year > 1099) return std::nullopt;
  return static_cast<double>(timegm(&tm));
}

// A run's error as --status lists it: one line, clipped, however long the file's is.
constexpr size_t kMaxErrorChars = 300;

// The run's own record is the newer one: a Slurm task or a run still going writes it.
void updateFromRunInfo(const std::string& dir, outputs::StudyRunRecord& run) {
  const auto info = outputs::readStudyRunInfo(dir, run.name);
  if (!info) return;
  if (info->status) run.status = *info->status;
  if (!info->error.empty()) run.error = info->error;
  const auto start = secondsOf(info->start_time);
  const auto end = secondsOf(info->end_time);
  if (start && end && run.status != RunStatus::running) run.seconds = *end - *start;
  if (start && run.status == RunStatus::running) run.seconds = units::unixSeconds() - *start;
}

}  // namespace

std::vector<outputs::StudyRunRecord> readStudyState(const std::string& dir) {
  outputs::StudyRecord record;
  try {
    record = outputs::readStudyRecord(dir, kMaxStudyRuns);
  } catch (const UserError& e) {
    throw UserError(std::string("study --status: ") + e.what());
  }
  for (auto& run : record.runs) {
    updateFromRunInfo(dir, run);
    run.error = clipForMessage(run.error, kMaxErrorChars);
  }
  return record.runs;
}

StudyProgress progressOf(const std::vector<outputs::StudyRunRecord>& runs, int parallel) {
  StudyProgress progress;
  progress.total = runs.size();
  double completed_seconds = 0;
  size_t timed = 0;
  for (const auto& run : runs) {
    if (run.status == RunStatus::completed) {
      ++progress.completed;
      if (run.seconds > 0) {
        completed_seconds += run.seconds;
        ++timed;
      }
    } else if (outputs::endedUnfinished(run.status)) {
      ++progress.failed;
    } else if (run.status == RunStatus::running) {
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
    const bool timed = run.seconds > 0 && run.status != RunStatus::pending;
    out += fmt::format("{:<12} {:<40} {}{}\n", outputs::runStatusText(run.status),
                       oneLine(outputs::study_files::runDir(run.name)), timed ? units::elapsedText(run.seconds) : "",
                       run.error.empty() ? "" : "  " + oneLine(run.error));
  }
  const int parallel = std::max<int>(1, static_cast<int>(progressOf(runs, 1).running));
  return out + "study: " + progressLine(progressOf(runs, parallel), parallel) + "\n";
}

}  // namespace gcrun::experiments
