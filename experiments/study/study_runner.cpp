#include "experiments/study/study_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <spdlog/fmt/fmt.h>
#include <yaml-cpp/yaml.h>

#include "hyperparams/base/errors.h"
#include "outputs/json.h"
#include "outputs/report/report.h"
#include "outputs/run_files.h"

namespace gcrun::experiments {
namespace {

namespace fs = std::filesystem;

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

std::string readFile(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string runStatus(const fs::path& dir) {
  try {
    if (!fs::is_regular_file(dir / "run.json")) return "";
    const auto info = YAML::LoadFile((dir / "run.json").string());
    return info["status"] ? info["status"].as<std::string>() : "";
  } catch (const YAML::Exception&) {
    return "";
  }
}

Next nextFor(const StudyRun& run, const fs::path& dir, const std::string& study_dir) {
  if (!fs::exists(dir)) return Next::fresh;
  const std::string status = runStatus(dir);
  if (!status.empty() && readFile(dir / "config.yaml") != run.config_yaml) {
    throw UserError("study: " + dir.string() + " was run with other settings than the study now asks for; "
                    "use another --output-dir than " + study_dir + " (or remove that run)");
  }
  if (status == "completed") return Next::skip;
  if ((status == "interrupted" || status == "running") && fs::is_regular_file(dir / "checkpoints" / "manifest.json")) {
    return Next::resume;
  }
  fs::remove_all(dir);  // failed, or died before its first checkpoint: from the start
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

// Starts one run as a child process whose output goes to `log`; it is sent SIGTERM when this
// process dies, so that a killed study leaves no run behind (it stops after a checkpoint).
pid_t start(const std::vector<std::string>& argv, const std::string& log, int threads) {
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("study: fork: ") + std::strerror(errno));
  if (pid > 0) return pid;
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) ::_exit(1);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
  }
  if (!std::getenv("OMP_NUM_THREADS")) ::setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 1);
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  ::execv(args[0], args.data());
  std::fprintf(stderr, "gcrun study: cannot start %s: %s\n", args[0], std::strerror(errno));
  ::_exit(1);
}

// The run's own error line: the last `gcrun: ...` line of its console output.
std::string errorLine(const std::string& log) {
  std::ifstream in(log);
  std::string last;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("gcrun: ", 0) == 0) last = line;
  }
  return last;
}

int exitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

void writeStudyJson(const StudySpec& spec, const std::string& dir, const std::vector<StudyRun>& runs,
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
  outputs::writeFileAtomically(dir + "/study.json", json + "\n  ]\n}\n");
}

// The report of the runs that have started, or failed before they could, in the study's order.
void writeStudyReport(const StudySpec& spec, const std::string& dir, const std::vector<StudyRun>& plan,
                      const std::vector<Outcome>& outcomes) {
  try {
    std::vector<outputs::RunData> runs;
    for (const auto& run : plan) {
      const std::string run_dir = dir + "/runs/" + run.dir_name;
      const auto& outcome = outcomes[run.index];
      if (fs::is_regular_file(run_dir + "/run.json")) {
        runs.push_back(outputs::loadRun(run_dir));
      } else if (outcome.status == "failed") {
        runs.push_back(outputs::runThatDidNotStart(run_dir, run.config_yaml, outcome.status, outcome.error));
      }
    }
    const auto result = outputs::writeReport(runs, {dir, outputs::reportFormats(), spec.description, reducerReads});
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

void writeSlurm(const StudySpec& spec, const StudyOptions& options, const std::string& dir, size_t count) {
  std::string command = shellQuoted(selfPath()) + " study " + shellQuoted(spec.file.empty() ? spec.name : spec.file) +
                        " --output-dir " + shellQuoted(fs::absolute(dir).string()) + " --only \"$SLURM_ARRAY_TASK_ID\"";
  for (const auto& a : options.assignments) command += " --set " + shellQuoted(a);
  for (const auto& p : options.plugins) command += " --plugin " + shellQuoted(p);
  const std::string script = fmt::format(
      "#!/bin/bash\n"
      "# Written by `gcrun study --slurm`: study {0}, one array task per run ({1} runs; `gcrun study ... --dry-run`\n"
      "# lists them). Each task starts {2} worker(s) with srun; gcrun reads the Slurm variables.\n"
      "# Submit with `sbatch {3}/slurm.sbatch`; when all tasks are done: gcrun report {3}\n"
      "#SBATCH --job-name=gcrun-{0}\n#SBATCH --array=0-{4}\n#SBATCH --ntasks={2}\n"
      "#SBATCH --output={3}/logs/slurm-%A_%a.log\n"
      "srun {5}\n",
      spec.name, count, options.nproc_per_node, fs::absolute(dir).string(), count - 1, command);
  outputs::writeFileAtomically(dir + "/slurm.sbatch", script);
}

// Holds DIR/study.lock (flock) for as long as this process and its runs live; waits for a study
// that holds it to end.
int lockStudy(const std::string& dir) {
  const std::string path = dir + "/study.lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0644);
  if (fd < 0) throw UserError("study: cannot open " + path + ": " + std::strerror(errno));
  const auto deadline = std::chrono::steady_clock::now() + kLockWait;
  bool said = false;
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      throw UserError("study: " + dir + " is in use by another study (" + path + " is locked); wait for it to end");
    }
    if (!said) std::printf("study: waiting for the study that holds %s\n", path.c_str());
    said = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return fd;
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
  fs::create_directories(dir + "/runs");
  fs::create_directories(dir + "/logs");
  if (options.slurm) {
    writeSlurm(spec, options, dir, runs.size());
    std::printf("study %s: wrote %s/slurm.sbatch (%zu array tasks)\n", spec.name.c_str(), dir.c_str(), runs.size());
    return 0;
  }
  // Array tasks run side by side in one directory: each looks after its own run only.
  const bool whole = !options.only;
  if (whole) lockStudy(dir);

  std::vector<Outcome> outcomes(runs.size());
  std::deque<size_t> pending;
  std::map<size_t, Next> next;
  for (const auto& run : runs) {
    if (!whole && run.index != *options.only) continue;
    next[run.index] = nextFor(run, dir + "/runs/" + run.dir_name, dir);
    if (next[run.index] == Next::skip) {
      outcomes[run.index].status = "completed";
    } else {
      pending.push_back(run.index);
    }
  }
  if (whole) writeStudyJson(spec, dir, runs, outcomes);
  std::printf("study %s: %zu runs, %zu to do, in %s\n", spec.name.c_str(), runs.size(), pending.size(), dir.c_str());
  std::fflush(stdout);

  const int jobs = std::max(1, options.jobs);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = std::max(1, cores / (jobs * std::max(1, options.nproc_per_node)));
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
      const std::string log = dir + "/logs/" + run.dir_name + ".log";
      const auto argv = experimentArgv(run, dir + "/runs/" + run.dir_name, next[index], options);
      running[start(argv, log, threads)] = {index, std::chrono::steady_clock::now()};
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
    const std::string state = runStatus(dir + "/runs/" + run.dir_name);
    outcome.status = outcome.exit_code == 0 ? "completed" : state == "interrupted" ? "interrupted" : "failed";
    outcome.error = outcome.exit_code == 0 ? "" : errorLine(dir + "/logs/" + run.dir_name + ".log");
    ++finished;
    std::printf("study: [%zu/%zu] runs/%s %s in %.0f s%s\n", finished, runs.size(), run.dir_name.c_str(),
                outcome.status.c_str(), outcome.seconds, outcome.error.empty() ? "" : (": " + outcome.error).c_str());
    std::fflush(stdout);
    if (whole) {
      writeStudyJson(spec, dir, runs, outcomes);
      writeStudyReport(spec, dir, runs, outcomes);
    }
  }
  ::sigaction(SIGINT, &previous_int, nullptr);
  ::sigaction(SIGTERM, &previous_term, nullptr);
  if (whole) {
    writeStudyJson(spec, dir, runs, outcomes);
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
