#include "experiments/study/study_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <thread>

#include <spdlog/fmt/fmt.h>

#include "experiments/setup/command_line.h"
#include "experiments/study/slurm_script.h"
#include "experiments/study/study_prediction.h"
#include "experiments/study/study_progress.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/process.h"
#include "hyperparams/base/signal_flag.h"
#include "hyperparams/base/text.h"
#include "outputs/files/file_lock.h"
#include "outputs/files/safe_files.h"
#include "outputs/json_document.h"
#include "outputs/report/report.h"
#include "outputs/run_directory.h"

namespace gcrun::experiments {
namespace {

namespace fs = std::filesystem;
using files::Directory;
using files::UniqueFd;
using outputs::Json;
namespace run_files = outputs::run_files;
namespace run_status = outputs::run_status;

constexpr auto kLockWait = std::chrono::seconds(120);

// `gcrun experiment`'s exit code when bad input stopped the run before training (cli/main.cpp).
constexpr int kRefusedExit = 2;

// The reason in a run's log ("gcrun: error: ..."), its last one, searched in the last 64 KiB;
// empty when there is none or the log cannot be read.
std::string refusalIn(const std::string& log) {
  constexpr size_t kTail = 64 << 10;
  try {
    const UniqueFd file = files::openBoundedFile(log, std::numeric_limits<size_t>::max());
    struct stat info {};
    if (::fstat(file.get(), &info) != 0) return "";
    const auto size = static_cast<size_t>(info.st_size);
    std::string tail(std::min(size, kTail), '\0');
    const ssize_t got = ::pread(file.get(), tail.data(), tail.size(), static_cast<off_t>(size - tail.size()));
    tail.resize(got > 0 ? static_cast<size_t>(got) : 0);
    const std::string mark = "gcrun: error: ";
    const size_t at = tail.rfind("\n" + mark);
    if (at == std::string::npos) return tail.rfind(mark, 0) == 0 ? firstLine(tail.substr(mark.size())) : "";
    return firstLine(tail.substr(at + 1 + mark.size()));
  } catch (const UserError&) {
    return "";
  }
}

// What a run needs next, judged from its directory.
enum class Next { skip, resume, fresh };

struct Outcome {
  std::string status = "pending";  // pending, completed, failed, interrupted, refused
  int exit_code = 0;
  std::string error;
  int attempts = 0;
  double seconds = 0;
};

// A file of a run directory, if it is a regular file of at most `limit` bytes: whatever else is
// there (a FIFO, a device, a huge file) says nothing about the run.
std::optional<std::string> readIfRegular(const std::string& path, size_t limit) {
  try {
    return files::readBoundedFile(path, limit);
  } catch (const UserError&) {
    return std::nullopt;
  }
}

// What runStudy writes into a run directory it creates, before the run starts there. Only a
// directory holding this marker, or a run.json with this study's config.yaml for the run, is
// ever cleared: anything else at runs/<dir_name> may be someone's data. The child's
// `--output-dir` accepts a directory that holds only the marker (outputs::RunDirectory::create).
std::string markerFor(const StudySpec& spec, const StudyRun& run) {
  return outputs::jsonText(Json{{"study", spec.name}, {"run", run.dir_name}, {"config", run.config}}) + "\n";
}

// Whether runs/<dir_name> is this study's run directory for `run`: marked by it, or empty.
bool createdFor(const StudySpec& spec, const StudyRun& run, const Directory& runs) {
  const auto marker = readIfRegular(runs.pathOf(run.dir_name) + "/" + run_files::kStudyRunMarker, 4096);
  return marker ? *marker == markerFor(spec, run) : runs.sub(run.dir_name, false).entries().empty();
}

Next nextFor(const StudySpec& spec, const StudyRun& run, const Directory& runs, const std::string& study_dir) {
  if (!runs.has(run.dir_name)) return Next::fresh;
  const std::string dir = runs.pathOf(run.dir_name);
  if (!runs.hasDirectory(run.dir_name)) {
    throw UserError("study: " + dir + " is not a directory; remove it or use another --output-dir than " + study_dir);
  }
  const auto info = runInfoOf(dir);
  const std::string status = info ? info->status : "";
  // A refused run wrote no config.yaml; its marker says whose it is.
  if (status.empty() || status == run_status::kRefused) {
    if (!createdFor(spec, run, runs)) {
      throw UserError("study: " + dir + " holds files but no run of this study (no run.json, no " +
                      run_files::kStudyRunMarker + " of this study); move them away or use another --output-dir than " +
                      study_dir);
    }
  } else if (const auto written = readIfRegular(dir + "/" + run_files::kConfig, files::kMaxConfigBytes);
             !written || !asksFor(run, *written)) {
    throw UserError("study: " + dir +
                    " was run with other settings than the study now asks for; "
                    "use another --output-dir than " +
                    study_dir + " (or remove that run)");
  }
  if (status == run_status::kCompleted) return Next::skip;
  if ((status == run_status::kInterrupted || status == run_status::kRunning) &&
      fs::is_regular_file(dir + "/" + run_files::kCheckpoints + "/" + run_files::kManifest)) {
    return Next::resume;
  }
  runs.removeTree(run.dir_name);  // failed, or died before its first checkpoint: from the start
  return Next::fresh;
}

// A run's `gcrun experiment`: a fresh one from the configuration the study resolved for it (its
// file in configs/), a resumed one from its own config.yaml, which nextFor found to be the same.
ExperimentRequest requestFor(const StudyRun& run, const std::string& run_dir, const std::string& config_file, Next next,
                             const StudyOptions& options) {
  ExperimentRequest request;
  request.preset = run.preset;
  if (next == Next::resume) {
    request.resume_dir = run_dir;
  } else {
    request.config_file = config_file;
    request.output_dir = run_dir;
  }
  request.launch.nproc_per_node = options.nproc_per_node;
  request.plugins = options.plugins;
  return request;
}

// This process's environment for a run: OMP_NUM_THREADS set to its share of the cores unless the
// user set it.
process::Environment runEnvironment(int threads) {
  auto environment = process::Environment::inherited();
  if (!environment.has("OMP_NUM_THREADS")) environment.set("OMP_NUM_THREADS", std::to_string(threads));
  return environment;
}

// Starts one run as a child process whose output goes to `log`; it is sent SIGTERM when this
// process dies, so that a killed study leaves no run behind (it stops after a checkpoint). The
// child inherits `lock` (when >= 0), so the study stays locked while the run lives.
pid_t start(const ExperimentRequest& request, const process::Environment& environment, const UniqueFd& log, int lock) {
  process::ChildSpec child;
  child.program = process::kThisExecutable;
  child.argv = {process::currentExecutable()};
  for (auto& argument : experimentArguments(request)) child.argv.push_back(std::move(argument));
  child.environment = environment;
  child.parent_death_signal = SIGTERM;
  child.output_fd = log.get();
  child.inherited_fd = lock;
  return process::spawn(child);
}

void writeStudyJson(const StudySpec& spec, const Directory& dir, const std::vector<StudyRun>& runs,
                    const std::vector<Outcome>& outcomes) {
  Json json{{"study", spec.name}, {"description", spec.description}, {"runs", Json::array()}};
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    const auto& o = outcomes[i];
    json["runs"].push_back({{"index", r.index},
                            {"config", r.config},
                            {"seed", r.seed},
                            {"dir", "runs/" + r.dir_name},
                            {"status", o.status},
                            {"exit_code", o.exit_code},
                            {"error", o.error},
                            {"attempts", o.attempts},
                            {"seconds", o.seconds}});
  }
  dir.writeAtomically("study.json", outputs::jsonText(json, 2) + "\n");
}

// The report of the runs that have started, or failed before they could, in the study's order.
void writeStudyReport(const StudySpec& spec, const std::string& dir, const std::vector<StudyRun>& plan,
                      const std::vector<Outcome>& outcomes) {
  try {
    std::vector<outputs::RunData> runs;
    std::vector<std::string> skipped;
    for (const auto& run : plan) {
      const std::string run_dir = dir + "/runs/" + run.dir_name;
      const auto& outcome = outcomes[run.index];
      const auto info = runInfoOf(run_dir);
      const bool started = info && info->status != run_status::kRefused;
      if (started || (!info && fs::is_regular_file(run_dir + "/" + run_files::kInfo))) {
        if (auto loaded = outputs::loadRunOrSkip(run_dir, skipped)) runs.push_back(std::move(*loaded));
      } else if (outcome.status == run_status::kFailed || outcome.status == run_status::kRefused) {
        runs.push_back(outputs::runThatDidNotStart(run_dir, run.config_yaml, outcome.status, outcome.error));
      }
    }
    outputs::ReportOptions options{dir, outputs::reportFormats(), spec.description, skipped};
    if (spec.predict) addPrediction(*spec.predict, dir, runs, options);
    const auto result = outputs::writeReport(runs, options);
    if (!result.note.empty()) std::printf("study: %s\n", result.note.c_str());
  } catch (const std::exception& e) {
    std::printf("study: the report could not be written: %s\n", e.what());
  }
}

std::vector<StudyRunState> statesOf(const std::vector<StudyRun>& runs, const std::vector<Outcome>& outcomes) {
  std::vector<StudyRunState> states;
  for (size_t i = 0; i < runs.size(); ++i) {
    states.push_back({"runs/" + runs[i].dir_name, outcomes[i].status, outcomes[i].seconds, outcomes[i].error});
  }
  return states;
}

void printPlan(const std::vector<StudyRun>& runs) {
  for (const auto& run : runs) {
    std::string sets;
    for (const auto& a : run.assignments) sets += " --set " + a;
    std::printf("%3zu  runs/%-32s %s%s\n", run.index, run.dir_name.c_str(), run.preset.c_str(), sets.c_str());
  }
}

// Holds DIR/study.lock (flock) for as long as this process and its runs live; waits for a study
// that holds it to end.
UniqueFd lockStudy(const Directory& dir) {
  const std::string path = dir.pathOf("study.lock");
  const auto deadline = std::chrono::steady_clock::now() + kLockWait;
  bool said = false;
  std::string holder;
  while (true) {
    auto lock = files::tryLockFile(dir, "study.lock", holder);
    if (lock) return lock;
    if (std::chrono::steady_clock::now() > deadline) {
      throw UserError("study: " + dir.path() + " is in use by another study (" + path + " is locked" +
                      (holder.empty() ? "" : " by pid " + holder) + "); wait for it to end");
    }
    if (!said) std::printf("study: waiting for the study that holds %s\n", path.c_str());
    said = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace

int runStudy(const StudySpec& spec, const StudyOptions& given) {
  StudyOptions options = given;
  if (options.nproc_per_node == 0) options.nproc_per_node = spec.processes;
  const auto runs = planStudy(spec, options.assignments);
  const std::string dir =
      options.output_dir.empty() ? std::string(outputs::kDefaultRunsFolder) + "/" + spec.name : options.output_dir;
  if (options.dry_run) {
    std::printf("study %s: %zu runs in %s\n", spec.name.c_str(), runs.size(), dir.c_str());
    printPlan(runs);
    return 0;
  }
  if (options.only && *options.only >= runs.size()) {
    throw UserError("--only: " + std::to_string(*options.only) + " is not below the study's " +
                    std::to_string(runs.size()) + " runs");
  }
  const std::string script = options.slurm ? slurmScript(spec, options, dir, runs.size()) : "";
  // Below the directory the user named, everything goes through its descriptor: a symlink planted
  // at runs/, logs/, configs/, a log or study.lock is refused; one at study.json is replaced.
  const auto study = Directory::open(dir, true);
  const auto run_dirs = study.sub("runs", true);
  const auto logs = study.sub("logs", true);
  if (options.slurm) {
    study.writeAtomically("slurm.sbatch", script);
    // The plan, all pending: `gcrun study --status DIR` follows the array's runs from it.
    writeStudyJson(spec, study, runs, std::vector<Outcome>(runs.size()));
    std::printf("study %s: wrote %s/slurm.sbatch (%zu array tasks)\n", spec.name.c_str(), dir.c_str(), runs.size());
    return 0;
  }
  const auto configs = study.sub("configs", true);
  // Array tasks run side by side in one directory: each looks after its own run only.
  const bool whole = !options.only;
  const UniqueFd lock = whole ? lockStudy(study) : UniqueFd();

  std::vector<Outcome> outcomes(runs.size());
  std::deque<size_t> pending;
  std::map<size_t, Next> next;
  for (const auto& run : runs) {
    if (!whole && run.index != *options.only) continue;
    next[run.index] = nextFor(spec, run, run_dirs, dir);
    if (next[run.index] == Next::skip) {
      outcomes[run.index].status = run_status::kCompleted;
    } else {
      pending.push_back(run.index);
    }
  }
  if (whole) writeStudyJson(spec, study, runs, outcomes);
  std::printf("study %s: %zu runs, %zu to do, in %s\n", spec.name.c_str(), runs.size(), pending.size(), dir.c_str());
  std::fflush(stdout);

  const int jobs = std::max(1, options.jobs);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = std::max(1, cores / (jobs * std::max(1, options.nproc_per_node)));
  const auto environment = runEnvironment(threads);
  // Until the runs have ended, a signal only stops them (waitpid returns EINTR, see below).
  std::optional<SignalFlag> signals(std::in_place);
  std::map<pid_t, std::pair<size_t, std::chrono::steady_clock::time_point>> running;
  size_t finished = runs.size() - pending.size();
  while (!pending.empty() || !running.empty()) {
    while (signals->received() == 0 && !pending.empty() && static_cast<int>(running.size()) < jobs) {
      const size_t index = pending.front();
      pending.pop_front();
      const auto& run = runs[index];
      const std::string config_file = run.dir_name + ".yaml";
      if (next[index] == Next::fresh) {
        run_dirs.sub(run.dir_name, true).writeAtomically(run_files::kStudyRunMarker, markerFor(spec, run));
        configs.writeAtomically(config_file, run.config_yaml);
      }
      const auto log = logs.openForAppend(run.dir_name + ".log");
      const auto request =
          requestFor(run, run_dirs.pathOf(run.dir_name), configs.pathOf(config_file), next[index], options);
      running[start(request, environment, log, lock.get())] = {index, std::chrono::steady_clock::now()};
      ++outcomes[index].attempts;
      outcomes[index].status = run_status::kRunning;
      if (whole) writeStudyJson(spec, study, runs, outcomes);
      std::printf("study: started runs/%s%s\n", run.dir_name.c_str(), next[index] == Next::resume ? " (resuming)" : "");
      std::fflush(stdout);
    }
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno != EINTR) break;
      for (const auto& kv : running) ::kill(kv.first, SIGTERM);  // stop after their checkpoints
      continue;
    }
    const auto found = running.find(pid);
    if (found == running.end()) continue;
    const auto [index, started] = found->second;
    running.erase(found);
    const auto& run = runs[index];
    auto& outcome = outcomes[index];
    outcome.exit_code = process::exitCodeOf(status);
    outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    // The run's own record says how it ended: a refusal or failure with its error, or a stop. A
    // refused resume leaves that record as it was: its exit code and its log say it.
    const auto info = runInfoOf(run_dirs.pathOf(run.dir_name));
    const bool refused = outcome.exit_code == kRefusedExit;
    const bool stopped = info && info->status == run_status::kInterrupted;
    outcome.status = outcome.exit_code == 0 ? run_status::kCompleted
                     : refused              ? run_status::kRefused
                     : stopped              ? run_status::kInterrupted
                                            : run_status::kFailed;
    const bool recorded = info && (!refused || info->status == run_status::kRefused);
    outcome.error = outcome.exit_code == 0 ? ""
                    : recorded             ? firstLine(info->error)
                    : refused              ? refusalIn(logs.pathOf(run.dir_name + ".log"))
                                           : "";
    ++finished;
    std::printf("study: [%zu/%zu] runs/%s %s in %.0f s%s\n", finished, runs.size(), run.dir_name.c_str(),
                outcome.status.c_str(), outcome.seconds, outcome.error.empty() ? "" : (": " + outcome.error).c_str());
    std::printf("study: %s\n", progressLine(progressOf(statesOf(runs, outcomes), jobs), jobs).c_str());
    std::fflush(stdout);
    if (whole) {
      writeStudyJson(spec, study, runs, outcomes);
      writeStudyReport(spec, dir, runs, outcomes);
    }
  }
  const int stop_signal = signals->received();
  signals.reset();  // from here a signal ends the study at once
  if (whole) {
    writeStudyJson(spec, study, runs, outcomes);
    writeStudyReport(spec, dir, runs, outcomes);
    std::printf("study %s: report in %s/report.md\n", spec.name.c_str(), dir.c_str());
  }
  if (stop_signal != 0) return 128 + stop_signal;
  if (!whole) return outcomes[*options.only].exit_code;
  std::string failed;
  size_t failures = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (outcomes[i].status == run_status::kCompleted) continue;
    ++failures;
    failed += (failed.empty() ? "" : ", ") + runs[i].dir_name;
  }
  if (failures > 0) {
    throw std::runtime_error(fmt::format("study: {} of {} runs did not complete: {} (see {}/study.json)", failures,
                                         runs.size(), failed, dir));
  }
  return 0;
}

}  // namespace gcrun::experiments
