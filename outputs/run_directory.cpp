#include "outputs/run_directory.h"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <filesystem>

#include "hyperparams/base/errors.h"
#include "outputs/files/file_lock.h"
#include "outputs/files/safe_files.h"

namespace gcrun::outputs {
namespace fs = std::filesystem;

std::string run_files::rankLog(int rank) { return "rank-" + std::to_string(rank) + ".log"; }
std::string run_files::traceFile(int rank) { return "trace-rank" + std::to_string(rank) + ".json"; }

namespace {

std::string localTimestamp() {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[32];
  std::strftime(text, sizeof(text), "%Y%m%d-%H%M%S", &local);
  return text;
}

// Preset names are plain, but a config file may name its experiment anything: keep the folder
// name to characters that need no quoting in a shell.
std::string folderSafe(const std::string& name) {
  if (name.empty()) return "run";
  std::string out = name;
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  }
  return out;
}

[[noreturn]] void throwCannotCreate(const fs::path& path, const std::error_code& error) {
  throw UserError("cannot create output directory '" + path.string() + "': " + error.message());
}

std::string createDefaultRunDirectory(const std::string& experiment) {
  fs::path parent = kDefaultRunsFolder;
  std::error_code error;
  fs::create_directories(parent, error);
  if (error) throwCannotCreate(parent, error);
  const std::string base = folderSafe(experiment) + "-" + localTimestamp();
  // create_directory reports an existing folder instead of failing, so two runs started in the
  // same second (even concurrently) each get a folder of their own.
  for (int suffix = 1;; ++suffix) {
    fs::path candidate = parent / (suffix == 1 ? base : base + "-" + std::to_string(suffix));
    if (fs::create_directory(candidate, error)) return candidate.string();
    if (error) throwCannotCreate(candidate, error);
  }
}

// Whether `path`'s entries are all in `allowed`.
template <class Allowed>
bool holdsOnly(const fs::path& path, Allowed allowed) {
  std::error_code error;
  const auto entries = fs::directory_iterator(path, error);
  if (error) return false;
  return std::all_of(begin(entries), end(entries),
                     [&](const fs::directory_entry& entry) { return allowed(entry.path().filename().string()); });
}

bool isStudyMarker(const std::string& name) { return name == run_files::kStudyRunMarker; }

// The files a run directory holds before its run.json: the launcher's, the logs, the lock.
bool isBeforeStartFile(const std::string& name) {
  if (isStudyMarker(name) || name == run_files::kWorkers || name == run_files::kLock) return true;
  return name.rfind("rank-", 0) == 0 && name.size() > 4 && name.compare(name.size() - 4, 4, ".log") == 0;
}

std::string createRequestedRunDirectory(const std::string& requested) {
  std::error_code error;
  fs::path path = requested;
  if (fs::exists(path, error)) {
    if (!fs::is_directory(path, error)) {
      throw UserError("output directory '" + requested +
                      "' exists and is not a directory; choose another --output-dir");
    }
    // A launch stopped before its run began (a signal in its first second) leaves only the
    // launcher's and the logs' files: it holds no run, so a rerun may start there.
    if (!holdsOnly(path, isBeforeStartFile)) {
      throw UserError("output directory '" + requested +
                      "' already holds files; choose another --output-dir or remove it");
    }
    return requested;
  }
  fs::create_directories(path, error);
  if (error) throwCannotCreate(path, error);
  return requested;
}

}  // namespace

RunDirectory RunDirectory::create(const std::string& requested, const std::string& experiment) {
  return RunDirectory(requested.empty() ? createDefaultRunDirectory(experiment)
                                        : createRequestedRunDirectory(requested));
}

bool RunDirectory::recordRefusal(const std::string& requested, const RunInfo& info) {
  try {
    std::error_code error;
    const fs::path path = requested;
    const bool exists = fs::exists(fs::symlink_status(path, error));
    if (exists && (!fs::is_directory(path, error) || !holdsOnly(path, isBeforeStartFile))) return false;
    if (!exists) fs::create_directories(path, error);
    if (error) return false;
    RunDirectory(requested).writeInfo(info);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

void RunDirectory::lockForProcess() const {
  std::string holder;
  auto lock = files::tryLockFile(files::Directory::open(path_, false), run_files::kLock, holder);
  if (!lock) {
    throw UserError("another gcrun" + (holder.empty() ? std::string() : " (pid " + holder + ")") +
                    " is using this run directory; wait for it to end");
  }
  lock.release();  // held until the process ends
}

void RunDirectory::checkResumable(const std::vector<std::string>& sinks, bool layer_stats, int world_size) const {
  const auto run = files::Directory::open(path_, false);
  const auto wants = [&](const char* sink) { return std::find(sinks.begin(), sinks.end(), sink) != sinks.end(); };
  std::vector<std::string> appended = {run_files::kLock};
  for (int rank = 0; rank < world_size; ++rank) appended.push_back(run_files::rankLog(rank));
  if (wants("jsonl")) appended.push_back(run_files::kMetrics);
  if (wants("csv")) appended.push_back(run_files::kEpochs);
  if (layer_stats) appended.push_back(run_files::kLayers);
  for (const auto& name : appended) run.checkAppendable(name);
  for (const std::string folder : {run_files::kTensorboard, run_files::kCheckpoints}) {
    if ((folder != run_files::kTensorboard || wants("tensorboard")) && run.has(folder)) run.sub(folder, false);
  }
}

std::optional<RunInfo> RunDirectory::readInfo() const {
  const std::string path = pathOf(run_files::kInfo);
  std::error_code error;
  if (!fs::exists(fs::symlink_status(path, error))) return std::nullopt;
  return parseRunInfo(files::readBoundedFile(path, files::kMaxRecordBytes));
}

void RunDirectory::writeInfo(const RunInfo& info) const { write(run_files::kInfo, runInfoJson(info)); }

void RunDirectory::write(std::string_view name, std::string_view contents) const {
  files::directoryToWrite(path_, std::string(name)).writeAtomically(std::string(name), contents);
}

void writeFileAtomically(const std::string& path, std::string_view contents) {
  const fs::path target(path);
  const auto parent = target.parent_path();
  const std::string name = target.filename().string();
  files::directoryToWrite(parent.empty() ? "." : parent.string(), name).writeAtomically(name, contents);
}

}  // namespace gcrun::outputs
