#include "outputs/study_directory.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <limits>
#include <set>
#include <thread>

#include "hyperparams/base/errors.h"
#include "outputs/files/file_lock.h"
#include "outputs/json.h"
#include "outputs/json_document.h"
#include "outputs/run_directory.h"

namespace gcrun::outputs {

std::string study_files::runDir(const std::string& run) { return std::string(kRuns) + "/" + run; }
std::string study_files::logFile(const std::string& run) { return run + ".log"; }
std::string study_files::configFile(const std::string& run) { return run + ".yaml"; }

namespace {

// study.json's "dir" of a run is runs/<name>.
const std::string kRunsPrefix = study_files::runDir("");
// "runs/" and a file name (sizeof counts the terminating NUL where the text has its "/").
constexpr size_t kMaxStudyRunDirChars = sizeof(study_files::kRuns) + NAME_MAX;

Json studyRunJson(const StudyRunRecord& run) {
  return {{"index", run.index},
          {"config", run.config},
          {"seed", run.seed},
          {"dir", study_files::runDir(run.name)},
          {"status", runStatusText(run.status)},
          {"exit_code", run.exit_code},
          {"error", run.error},
          {"attempts", run.attempts},
          {"seconds", run.seconds}};
}

// Run `index` of study.json `file`; a time past kMaxRunSeconds is refused, naming the file.
StudyRunRecord studyRunOf(const Json& entry, const std::string& file, size_t index) {
  StudyRunRecord run;
  const int64_t planned = integerOr(entry, "index", 0);
  run.index = planned > 0 ? static_cast<size_t>(planned) : 0;
  run.config = stringOr(entry, "config", "");
  run.seed = integerOr(entry, "seed", 0);
  const std::string dir = stringOr(entry, "dir", "");
  run.name = dir.rfind(kRunsPrefix, 0) == 0 ? dir.substr(kRunsPrefix.size()) : "";
  run.status = parseRunStatus(stringOr(entry, "status", "")).value_or(RunStatus::pending);
  const int64_t exit_code = integerOr(entry, "exit_code", 0);
  if (exit_code >= INT_MIN && exit_code <= INT_MAX) run.exit_code = static_cast<int>(exit_code);
  run.error = stringOr(entry, "error", "");
  const int64_t attempts = integerOr(entry, "attempts", 0);
  if (attempts >= 0 && attempts <= INT_MAX) run.attempts = static_cast<int>(attempts);
  run.seconds = numberAt(entry, "seconds").value_or(0);
  if (run.seconds < 0 || run.seconds > kMaxRunSeconds) {
    throw UserError(file + ": runs[" + std::to_string(index) + "].seconds is " + jsonNumber(run.seconds) +
                    "; a run's time is 0 to " + jsonNumber(kMaxRunSeconds) + " s");
  }
  return run;
}

// Whether study.json's "dir" `dir` names a run directory of the study: runs/<name>, and nothing
// that leads out of it.
bool isStudyRunDir(const std::string& dir) {
  return dir.rfind(kRunsPrefix, 0) == 0 && dir.size() > kRunsPrefix.size() && dir.find("..") == std::string::npos &&
         dir.size() <= kMaxStudyRunDirChars;
}

std::string markerOf(const std::string& study, const StudyRunRecord& run) {
  return jsonText(Json{{"study", study}, {"run", run.name}, {"config", run.config}}) + "\n";
}

std::optional<std::string> readStudyFileIfRegular(const std::string& path, size_t limit) {
  try {
    return files::readBoundedFile(path, limit);
  } catch (const UserError&) {
    return std::nullopt;
  }
}

}  // namespace

std::string studyRecordJson(const StudyRecord& record) {
  Json json{{"study", record.study}, {"description", record.description}, {"runs", Json::array()}};
  for (const auto& run : record.runs) json["runs"].push_back(studyRunJson(run));
  return jsonText(json, 2) + "\n";
}

StudyRecord readStudyRecord(const std::string& dir, uint64_t max_runs) {
  const std::string file = dir + "/" + study_files::kRecord;
  if (const auto why = files::notRegularFileReason(file); !why.empty()) {
    throw UserError(file + ": " + why + "; give the directory a study runs in");
  }
  std::string why;
  const auto json = parseJson(files::readBoundedFile(file, files::kMaxRecordBytes), &why);
  const auto* runs = json ? memberOf(*json, "runs") : nullptr;
  if (!runs || !runs->is_array()) {
    throw UserError(file + " is not a study's study.json" + (why.empty() ? "" : " (" + why + ")"));
  }
  if (runs->size() > max_runs) {
    throw UserError(file + " lists " + std::to_string(runs->size()) + " runs, more than the " +
                    std::to_string(max_runs) + " a study may have");
  }
  StudyRecord record;
  record.study = stringOr(*json, "study", "");
  record.description = stringOr(*json, "description", "");
  std::set<std::string> seen;
  for (size_t i = 0; i < runs->size(); ++i) {
    const auto& entry = (*runs)[i];
    if (!entry.is_object()) continue;
    auto run = studyRunOf(entry, file, i);
    if (!isStudyRunDir(stringOr(entry, "dir", ""))) continue;
    if (!seen.insert(run.name).second) continue;
    record.runs.push_back(std::move(run));
  }
  return record;
}

std::optional<RunInfo> readStudyRunInfo(const std::string& dir, const std::string& run) {
  try {
    return RunDirectory(dir + "/" + study_files::kRuns + "/" + run).readInfo();
  } catch (const UserError&) {
    return std::nullopt;
  }
}

StudyDirectory StudyDirectory::open(const std::string& path, bool to_run) {
  auto root = files::Directory::open(path, true);
  auto runs = root.sub(study_files::kRuns, true);
  auto logs = root.sub(study_files::kLogs, true);
  std::optional<files::Directory> configs;
  if (to_run) configs = root.sub(study_files::kConfigs, true);
  return StudyDirectory(std::move(root), std::move(runs), std::move(logs), std::move(configs));
}

std::string StudyDirectory::configPath(const std::string& run) const {
  return pathOf(study_files::kConfigs) + "/" + study_files::configFile(run);
}

void StudyDirectory::writeRecord(const StudyRecord& record) const {
  root_.writeAtomically(study_files::kRecord, studyRecordJson(record));
}

void StudyDirectory::writeSlurmScript(std::string_view script) const {
  root_.writeAtomically(study_files::kSlurmScript, script);
}

files::UniqueFd StudyDirectory::lock(std::chrono::seconds wait, const std::function<void()>& waiting) const {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  bool said = false;
  std::string holder;
  while (true) {
    auto lock = files::tryLockFile(root_, study_files::kLock, holder);
    if (lock) return lock;
    if (std::chrono::steady_clock::now() > deadline) {
      throw UserError("study: " + path() + " is in use by another study (" + pathOf(study_files::kLock) + " is locked" +
                      (holder.empty() ? "" : " by pid " + holder) + "); wait for it to end");
    }
    if (!said && waiting) waiting();
    said = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

std::optional<std::string> StudyDirectory::runConfig(const std::string& run) const {
  return readStudyFileIfRegular(runPath(run) + "/" + run_files::kConfig, files::kMaxConfigBytes);
}

bool StudyDirectory::hasCheckpoint(const std::string& run) const {
  std::error_code error;
  return std::filesystem::is_regular_file(runPath(run) + "/" + run_files::kCheckpoints + "/" + run_files::kManifest,
                                          error);
}

void StudyDirectory::markRun(const std::string& study, const StudyRunRecord& run) const {
  runs_.sub(run.name, true).writeAtomically(run_files::kStudyRunMarker, markerOf(study, run));
}

bool StudyDirectory::isRunOf(const std::string& study, const StudyRunRecord& run) const {
  const auto marker = readStudyFileIfRegular(runPath(run.name) + "/" + run_files::kStudyRunMarker, 4096);
  return marker ? *marker == markerOf(study, run) : runs_.sub(run.name, false).entries().empty();
}

void StudyDirectory::writeRunConfig(const std::string& run, std::string_view yaml) const {
  if (!configs_) throw std::logic_error("StudyDirectory::writeRunConfig: opened without configs/");
  configs_->writeAtomically(study_files::configFile(run), yaml);
}

std::string StudyDirectory::logTail(const std::string& run, size_t bytes) const {
  try {
    const auto file = files::openBoundedFile(logPath(run), std::numeric_limits<size_t>::max());
    struct stat info {};
    if (::fstat(file.get(), &info) != 0) return "";
    const auto size = static_cast<size_t>(info.st_size);
    std::string tail(std::min(size, bytes), '\0');
    const ssize_t got = ::pread(file.get(), tail.data(), tail.size(), static_cast<off_t>(size - tail.size()));
    tail.resize(got > 0 ? static_cast<size_t>(got) : 0);
    return tail;
  } catch (const UserError&) {
    return "";
  }
}

}  // namespace gcrun::outputs
