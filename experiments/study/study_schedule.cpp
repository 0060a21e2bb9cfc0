#include "experiments/study/study_schedule.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <map>
#include <thread>

#include "experiments/setup/command_line.h"
#include "experiments/study/study_progress.h"
#include "hyperparams/base/process.h"
#include "hyperparams/base/signal_flag.h"
#include "hyperparams/base/text.h"

namespace gcrun::experiments {
namespace {

using outputs::RunStatus;
using outputs::StudyRunRecord;
using Clock = std::chrono::steady_clock;

// `gcrun experiment`'s exit code when bad input stopped the run before training (cli/main.cpp).
constexpr int kRefusedExit = 2;

// The reason in a run's log ("gcrun: error: ..."), its last one, searched in the last 64 KiB;
// empty when there is none or the log cannot be read.
std::string refusalIn(const outputs::StudyDirectory& study, const std::string& run) {
  const std::string tail = study.logTail(run, 64 << 10);
  const std::string mark = "gcrun: error: ";
  const size_t at = tail.rfind("\n" + mark);
  if (at == std::string::npos) return tail.rfind(mark, 0) == 0 ? firstLine(tail.substr(mark.size())) : "";
  return firstLine(tail.substr(at + 1 + mark.size()));
}

// A run's `gcrun experiment`: a fresh one from the configuration the study resolved for it (its
// file in configs/), a resumed one from its own config.yaml, which the plan found to be the same.
ExperimentRequest requestFor(const StudySchedule& schedule, const StudyRun& run, Next next) {
  ExperimentRequest request;
  request.preset = run.preset;
  if (next == Next::resume) {
    request.resume_dir = schedule.study.runPath(run.dir_name);
  } else {
    request.config_file = schedule.study.configPath(run.dir_name);
    request.output_dir = schedule.study.runPath(run.dir_name);
  }
  request.launch.nproc_per_node = schedule.options.nproc_per_node;
  request.plugins = schedule.options.plugins;
  return request;
}

// This process's environment for each run: OMP_NUM_THREADS set to its share of the cores unless
// the user set it.
process::Environment runEnvironment(const StudyOptions& options) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = std::max(1, cores / (std::max(1, options.jobs) * std::max(1, options.nproc_per_node)));
  auto environment = process::Environment::inherited();
  if (!environment.has("OMP_NUM_THREADS")) environment.set("OMP_NUM_THREADS", std::to_string(threads));
  return environment;
}

// The runs of one study process, from their start to their end.
class Scheduler {
 public:
  Scheduler(const StudySchedule& schedule, std::deque<ScheduledRun> todo, outputs::StudyRecord& record)
      : schedule_(schedule),
        todo_(std::move(todo)),
        record_(record),
        environment_(runEnvironment(schedule.options)),
        finished_(schedule.plan.size() - todo_.size()) {}

  int run() {
    const int jobs = std::max(1, schedule_.options.jobs);
    // Until the runs have ended, a signal only stops them (waitpid returns EINTR, see below).
    const SignalFlag signals;
    while (!todo_.empty() || !running_.empty()) {
      while (signals.received() == 0 && !todo_.empty() && static_cast<int>(running_.size()) < jobs) {
        start(todo_.front());
        todo_.pop_front();
      }
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, 0);
      if (pid < 0) {
        if (errno != EINTR) break;
        for (const auto& kv : running_) ::kill(kv.first, SIGTERM);  // stop after their checkpoints
        continue;
      }
      const auto found = running_.find(pid);
      if (found == running_.end()) continue;
      const auto [index, started] = found->second;
      running_.erase(found);
      finish(index, process::exitCodeOf(status), std::chrono::duration<double>(Clock::now() - started).count());
    }
    return signals.received();
  }

 private:
  // Starts the run as a child whose output goes to its log; it is sent SIGTERM when this process
  // dies, so that a killed study leaves no run behind (it stops after a checkpoint). The child
  // inherits the lock, so the study stays locked while the run lives.
  void start(const ScheduledRun& scheduled) {
    const auto& run = schedule_.plan[scheduled.index];
    auto& line = record_.runs[scheduled.index];
    if (scheduled.next == Next::fresh) {
      schedule_.study.markRun(schedule_.spec.name, line);
      schedule_.study.writeRunConfig(run.dir_name, run.config_yaml);
    }
    const auto log = schedule_.study.openLog(run.dir_name);
    process::ChildSpec child;
    child.program = process::kThisExecutable;
    child.argv = {process::currentExecutable()};
    for (auto& argument : experimentArguments(requestFor(schedule_, run, scheduled.next))) {
      child.argv.push_back(std::move(argument));
    }
    child.environment = environment_;
    child.parent_death_signal = SIGTERM;
    child.output_fd = log.get();
    child.inherited_fd = schedule_.lock;
    running_[process::spawn(child)] = {scheduled.index, Clock::now()};
    ++line.attempts;
    line.status = RunStatus::running;
    writeRecord();
    std::printf("study: started %s%s\n", outputs::study_files::runDir(run.dir_name).c_str(),
                scheduled.next == Next::resume ? " (resuming)" : "");
    std::fflush(stdout);
  }

  // The run's own record says how it ended: a refusal or failure with its error, or a stop. A
  // refused resume leaves that record as it was: its exit code and its log say it.
  void finish(size_t index, int exit_code, double seconds) {
    auto& line = record_.runs[index];
    line.exit_code = exit_code;
    line.seconds = seconds;
    const auto info = schedule_.study.runInfo(line.name);
    const bool refused = exit_code == kRefusedExit;
    const bool stopped = info && info->status == RunStatus::interrupted;
    line.status = exit_code == 0 ? RunStatus::completed
                  : refused      ? RunStatus::refused
                  : stopped      ? RunStatus::interrupted
                                 : RunStatus::failed;
    const bool recorded = info && (!refused || info->status == RunStatus::refused);
    line.error = exit_code == 0 ? ""
                 : recorded     ? firstLine(info->error)
                 : refused      ? refusalIn(schedule_.study, line.name)
                                : "";
    ++finished_;
    const int jobs = std::max(1, schedule_.options.jobs);
    std::printf("study: [%zu/%zu] %s %s in %.0f s%s\n", finished_, record_.runs.size(),
                outputs::study_files::runDir(line.name).c_str(), outputs::runStatusText(line.status), line.seconds,
                line.error.empty() ? "" : (": " + line.error).c_str());
    std::printf("study: %s\n", progressLine(progressOf(record_.runs, jobs), jobs).c_str());
    std::fflush(stdout);
    writeRecord();
  }

  void writeRecord() const {
    if (schedule_.whole) schedule_.study.writeRecord(record_);
  }

  const StudySchedule& schedule_;
  std::deque<ScheduledRun> todo_;
  outputs::StudyRecord& record_;
  const process::Environment environment_;
  size_t finished_;
  std::map<pid_t, std::pair<size_t, Clock::time_point>> running_;
};

}  // namespace

int runSchedule(const StudySchedule& schedule, std::deque<ScheduledRun> todo, outputs::StudyRecord& record) {
  return Scheduler(schedule, std::move(todo), record).run();
}

}  // namespace gcrun::experiments
