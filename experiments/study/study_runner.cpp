#include "experiments/study/study_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <optional>
#include <thread>

#include <spdlog/fmt/fmt.h>
#include <yaml-cpp/yaml.h>

#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"
#include "outputs/files/safe_files.h"
#include "outputs/json.h"
#include "outputs/report/report.h"
#include "outputs/run_files.h"

namespace gcrun::experiments {
namespace {

namespace fs = std::filesystem;
using files::Directory;
using files::UniqueFd;

constexpr auto kLockWait = std::chrono::seconds(120);

volatile std::sig_atomic_t stop_signal = 0;
void requestStop(int signal) { stop_signal = signal; }

// What a run needs next, judged from its directory.
enum class Next { skip, resume, fresh };

struct Outcome {
  std::string status = "pending";  // pending, completed, failed, interrupted
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

std::string runStatus(const std::string& dir) {
  const auto json = readIfRegular(dir + "/run.json", files::kMaxRecordBytes);
  if (!json) return "";
  try {
    const auto info = YAML::Load(*json);
    return info["status"] ? info["status"].as<std::string>() : "";
  } catch (const YAML::Exception&) {
    return "";
  }
}

// What runStudy writes into a run directory it creates, before the run starts there. Only a
// directory holding this marker, or a run.json with this study's config.yaml for the run, is
// ever cleared: anything else at runs/<dir_name> may be someone's data. The child's
// `--output-dir` accepts a directory that holds only the marker (outputs::createRunDirectory).
std::string markerFor(const StudySpec& spec, const StudyRun& run) {
  return "{\"study\": " + outputs::jsonString(spec.name) + ", \"run\": " + outputs::jsonString(run.dir_name) +
         ", \"config\": " + outputs::jsonString(run.config) + "}\n";
}

// Whether runs/<dir_name> is this study's run directory for `run`: marked by it, or empty.
bool createdFor(const StudySpec& spec, const StudyRun& run, const Directory& runs) {
  const auto marker = readIfRegular(runs.pathOf(run.dir_name) + "/" + outputs::kStudyRunMarker, 4096);
  return marker ? *marker == markerFor(spec, run) : runs.sub(run.dir_name, false).entries().empty();
}

Next nextFor(const StudySpec& spec, const StudyRun& run, const Directory& runs, const std::string& study_dir) {
  if (!runs.has(run.dir_name)) return Next::fresh;
  const std::string dir = runs.pathOf(run.dir_name);
  if (!runs.hasDirectory(run.dir_name)) {
    throw UserError("study: " + dir + " is not a directory; remove it or use another --output-dir than " + study_dir);
  }
  const std::string status = runStatus(dir);
  if (status.empty()) {
    if (!createdFor(spec, run, runs)) {
      throw UserError("study: " + dir + " holds files but no run of this study (no run.json, no " +
                      outputs::kStudyRunMarker + " of this study); move them away or use another --output-dir than " +
                      study_dir);
    }
  } else if (readIfRegular(dir + "/config.yaml", files::kMaxConfigBytes) != run.config_yaml) {
    throw UserError("study: " + dir + " was run with other settings than the study now asks for; "
                    "use another --output-dir than " + study_dir + " (or remove that run)");
  }
  if (status == "completed") return Next::skip;
  if ((status == "interrupted" || status == "running") && fs::is_regular_file(dir + "/checkpoints/manifest.json")) {
    return Next::resume;
  }
  runs.removeTree(run.dir_name);  // failed, or died before its first checkpoint: from the start
  return Next::fresh;
}

std::string selfPath() {
  std::error_code error;
  const auto path = fs::read_symlink("/proc/self/exe", error);
  return error ? "gcrun" : path.string();
}

std::vector<std::string> experimentArgv(const StudyRun& run, const std::string& dir, Next next,
                                        const StudyOptions& options) {
  std::vector<std::string> argv = {selfPath(), "experiment", run.preset};
  for (const auto& assignment : run.assignments) {
    argv.push_back("--set");
    argv.push_back(assignment);
  }
  argv.push_back(next == Next::resume ? "--resume" : "--output-dir");
  argv.push_back(dir);
  if (options.nproc_per_node > 1) {
    argv.push_back("--nproc-per-node");
    argv.push_back(std::to_string(options.nproc_per_node));
  }
  for (const auto& plugin : options.plugins) {
    argv.push_back("--plugin");
    argv.push_back(plugin);
  }
  return argv;
}

// This process's environment for a run: OMP_NUM_THREADS set to its share of the cores unless the
// user set it.
std::vector<std::string> runEnvironment(int threads) {
  std::vector<std::string> environment;
  for (char** variable = environ; *variable != nullptr; ++variable) environment.emplace_back(*variable);
  if (!std::getenv("OMP_NUM_THREADS")) environment.push_back("OMP_NUM_THREADS=" + std::to_string(threads));
  return environment;
}

std::vector<char*> pointersTo(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (const auto& text : strings) pointers.push_back(const_cast<char*>(text.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

// Starts one run as a child process whose output goes to `log`; it is sent SIGTERM when this
// process dies, so that a killed study leaves no run behind (it stops after a checkpoint). The
// child inherits `lock` (when >= 0), so the study stays locked while the run lives. Everything
// is prepared before fork: this process may have threads, so between fork and exec the child
// makes only async-signal-safe system calls (no allocation, no open, no setenv).
pid_t start(const std::vector<std::string>& argv, const std::vector<std::string>& environment, const UniqueFd& log,
            int lock) {
  const auto args = pointersTo(argv);
  const auto variables = pointersTo(environment);
  const std::string cannot_start = "gcrun study: cannot start " + argv[0] + "\n";
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("study: fork: ") + std::strerror(errno));
  if (pid > 0) return pid;
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) ::_exit(1);
  ::dup2(log.get(), STDOUT_FILENO);
  ::dup2(log.get(), STDERR_FILENO);
  if (lock >= 0) ::fcntl(lock, F_SETFD, 0);  // opened close-on-exec
  ::execve(args[0], args.data(), variables.data());
  [[maybe_unused]] const auto ignored = ::write(STDERR_FILENO, cannot_start.data(), cannot_start.size());
  ::_exit(1);
}

// The run's own error line: the last `gcrun: ...` line of the end of its console output. Read
// through the logs directory without following a symlink, and only the end: the log is data too.
std::string errorLine(const Directory& logs, const std::string& name) {
  constexpr off_t kTail = 64 << 10;
  const UniqueFd log(::openat(logs.fd(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat info {};
  if (!log || ::fstat(log.get(), &info) != 0 || !S_ISREG(info.st_mode)) return "";
  std::string tail(static_cast<size_t>(std::min(info.st_size, kTail)), '\0');
  const ssize_t got = ::pread(log.get(), tail.data(), tail.size(), info.st_size - static_cast<off_t>(tail.size()));
  tail.resize(got > 0 ? static_cast<size_t>(got) : 0);
  std::string last;
  for (size_t begin = 0; begin < tail.size();) {
    const size_t end = std::min(tail.find('\n', begin), tail.size());
    if (tail.compare(begin, 7, "gcrun: ") == 0) last = tail.substr(begin, end - begin);
    begin = end + 1;
  }
  return last;
}

int exitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

void writeStudyJson(const StudySpec& spec, const Directory& dir, const std::vector<StudyRun>& runs,
                    const std::vector<Outcome>& outcomes) {
  using outputs::jsonNumber;
  using outputs::jsonString;
  std::string json = "{\n  \"study\": " + jsonString(spec.name) + ",\n  \"description\": " +
                     jsonString(spec.description) + ",\n  \"runs\": [";
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    const auto& o = outcomes[i];
    json += std::string(i ? "," : "") + "\n    {\"index\": " + std::to_string(r.index) +
            ", \"config\": " + jsonString(r.config) + ", \"seed\": " + std::to_string(r.seed) +
            ", \"dir\": " + jsonString("runs/" + r.dir_name) + ", \"status\": " + jsonString(o.status) +
            ", \"exit_code\": " + std::to_string(o.exit_code) + ", \"error\": " + jsonString(o.error) +
            ", \"attempts\": " + std::to_string(o.attempts) + ", \"seconds\": " + jsonNumber(o.seconds) + "}";
  }
  dir.writeAtomically("study.json", json + "\n  ]\n}\n");
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
      if (fs::is_regular_file(run_dir + "/run.json")) {
        if (auto loaded = outputs::loadRunOrSkip(run_dir, skipped)) runs.push_back(std::move(*loaded));
      } else if (outcome.status == "failed") {
        runs.push_back(outputs::runThatDidNotStart(run_dir, run.config_yaml, outcome.status, outcome.error));
      }
    }
    const auto result =
        outputs::writeReport(runs, {dir, outputs::reportFormats(), spec.description, skipped});
    if (!result.note.empty()) std::printf("study: %s\n", result.note.c_str());
  } catch (const std::exception& e) {
    std::printf("study: the report could not be written: %s\n", e.what());
  }
}

void printPlan(const std::vector<StudyRun>& runs) {
  for (const auto& run : runs) {
    std::string sets;
    for (const auto& a : run.assignments) sets += " --set " + a;
    std::printf("%3zu  runs/%-32s %s%s\n", run.index, run.dir_name.c_str(), run.preset.c_str(), sets.c_str());
  }
}

std::string shellQuoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A value written on an #SBATCH line or in a comment of slurm.sbatch, where no shell quoting
// applies: a newline there would start a line of its own, which bash runs. sbatch also splits an
// #SBATCH line at white space, into options of its own (`on_sbatch_line`).
void checkScriptLine(const std::string& value, const std::string& what, bool on_sbatch_line, const std::string& fix) {
  const auto bad = std::find_if(value.begin(), value.end(), [&](unsigned char c) {
    return c < 0x20 || c == 0x7f || (on_sbatch_line && c == ' ');
  });
  if (bad == value.end()) return;
  const std::string kind = *bad == '\n' ? "a newline" : *bad == ' ' ? "a space" : "a control character";
  throw UserError("study: --slurm: " + what + " '" + clipForMessage(value) + "' holds " + kind +
                  ", which slurm.sbatch cannot hold on its " + (on_sbatch_line ? "#SBATCH lines" : "comment lines") +
                  "; " + fix);
}

// A job name of characters that need no quoting anywhere.
std::string jobName(const std::string& name) {
  std::string out = "gcrun-";
  for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '_';
  return out;
}

// DIR/slurm.sbatch for the study in `dir`; refused before anything is written if a name cannot
// be written in it. Every value on the srun line is quoted for the shell.
std::string slurmScript(const StudySpec& spec, const StudyOptions& options, const std::string& dir, size_t count) {
  const std::string absolute = fs::absolute(dir).string();
  checkScriptLine(spec.name, "the study's name", false, "rename the study file");
  checkScriptLine(absolute, "the study directory", true, "choose another --output-dir");
  std::string command = shellQuoted(selfPath()) + " study " + shellQuoted(spec.file.empty() ? spec.name : spec.file) +
                        " --output-dir " + shellQuoted(absolute) + " --only \"$SLURM_ARRAY_TASK_ID\"";
  for (const auto& a : options.assignments) command += " --set " + shellQuoted(a);
  for (const auto& p : options.plugins) command += " --plugin " + shellQuoted(p);
  return fmt::format(
      "#!/bin/bash\n"
      "# Written by `gcrun study --slurm`: study {0}, one array task per run ({1} runs; `gcrun study ... --dry-run`\n"
      "# lists them). Each task starts {2} worker(s) with srun; gcrun reads the Slurm variables.\n"
      "# Submit with `sbatch {3}/slurm.sbatch`; when all tasks are done: gcrun report {3}\n"
      "#SBATCH --job-name={6}\n#SBATCH --array=0-{4}\n#SBATCH --ntasks={2}\n"
      "#SBATCH --output={3}/logs/slurm-%A_%a.log\n"
      "srun {5}\n",
      spec.name, count, options.nproc_per_node, absolute, count - 1, command, jobName(spec.name));
}

// Holds DIR/study.lock (flock) for as long as this process and its runs live; waits for a study
// that holds it to end.
UniqueFd lockStudy(const Directory& dir) {
  const std::string path = dir.pathOf("study.lock");
  auto lock = dir.openLockFile("study.lock");
  const auto deadline = std::chrono::steady_clock::now() + kLockWait;
  bool said = false;
  while (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      throw UserError("study: " + dir.path() + " is in use by another study (" + path + " is locked); wait for it to end");
    }
    if (!said) std::printf("study: waiting for the study that holds %s\n", path.c_str());
    said = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return lock;
}

}  // namespace

int runStudy(const StudySpec& spec, const StudyOptions& options) {
  const auto runs = planStudy(spec, options.assignments);
  const std::string dir = options.output_dir.empty() ? "outputs/" + spec.name : options.output_dir;
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
  // at runs/, logs/, a log, study.lock or study.json is refused, never followed.
  const auto study = Directory::open(dir, true);
  const auto run_dirs = study.sub("runs", true);
  const auto logs = study.sub("logs", true);
  if (options.slurm) {
    study.writeAtomically("slurm.sbatch", script);
    std::printf("study %s: wrote %s/slurm.sbatch (%zu array tasks)\n", spec.name.c_str(), dir.c_str(), runs.size());
    return 0;
  }
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
      outcomes[run.index].status = "completed";
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
  stop_signal = 0;
  struct sigaction action {};
  action.sa_handler = requestStop;  // no SA_RESTART: waitpid returns to check the flag
  struct sigaction previous_int {}, previous_term {};
  ::sigaction(SIGINT, &action, &previous_int);
  ::sigaction(SIGTERM, &action, &previous_term);

  std::map<pid_t, std::pair<size_t, std::chrono::steady_clock::time_point>> running;
  size_t finished = runs.size() - pending.size();
  while (!pending.empty() || !running.empty()) {
    while (stop_signal == 0 && !pending.empty() && static_cast<int>(running.size()) < jobs) {
      const size_t index = pending.front();
      pending.pop_front();
      const auto& run = runs[index];
      if (next[index] == Next::fresh) {
        run_dirs.sub(run.dir_name, true).writeAtomically(outputs::kStudyRunMarker, markerFor(spec, run));
      }
      const auto log = logs.openForAppend(run.dir_name + ".log");
      const auto argv = experimentArgv(run, run_dirs.pathOf(run.dir_name), next[index], options);
      running[start(argv, environment, log, lock.get())] = {index, std::chrono::steady_clock::now()};
      ++outcomes[index].attempts;
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
    outcome.exit_code = exitCodeOf(status);
    outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const std::string state = runStatus(run_dirs.pathOf(run.dir_name));
    outcome.status = outcome.exit_code == 0 ? "completed" : state == "interrupted" ? "interrupted" : "failed";
    outcome.error = outcome.exit_code == 0 ? "" : errorLine(logs, run.dir_name + ".log");
    ++finished;
    std::printf("study: [%zu/%zu] runs/%s %s in %.0f s%s\n", finished, runs.size(), run.dir_name.c_str(),
                outcome.status.c_str(), outcome.seconds, outcome.error.empty() ? "" : (": " + outcome.error).c_str());
    std::fflush(stdout);
    if (whole) {
      writeStudyJson(spec, study, runs, outcomes);
      writeStudyReport(spec, dir, runs, outcomes);
    }
  }
  ::sigaction(SIGINT, &previous_int, nullptr);
  ::sigaction(SIGTERM, &previous_term, nullptr);
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
    if (outcomes[i].status == "completed") continue;
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
