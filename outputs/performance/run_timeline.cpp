#include "outputs/performance/run_timeline.h"

#include <map>
#include <regex>

#include "hyperparams/base/errors.h"
#include "outputs/files/safe_files.h"
#include "outputs/network/network_profile.h"
#include "outputs/performance/run_schedule.h"
#include "outputs/progress/progress_line.h"
#include "outputs/trace/trace_file.h"

namespace gcrun::performance {
namespace {

// Every trace-rank<r>.json in a run directory, its workers by global rank.
struct TracedWorkers {
  std::map<int, trace::WorkerTimeline> workers;
  std::map<int, std::string> file_of;  // each worker's trace file, for messages
  size_t files = 0;
  bool summable = false;
  bool truncated = false;
};

TracedWorkers readTraces(const std::string& dir) {
  static const std::regex trace_name("trace-rank[0-9]+\\.json");
  TracedWorkers traced;
  for (const auto& name : files::Directory::open(dir, false).entries()) {
    if (!std::regex_match(name, trace_name)) continue;
    ++traced.files;
    const auto path = dir + "/" + name;
    auto process = trace::readTraceFile(path);
    traced.truncated |= process.truncated;
    traced.summable |= process.summable;
    for (auto& worker : process.workers) {
      traced.file_of[worker.worker] = path;
      traced.workers[worker.worker] = std::move(worker);
    }
  }
  return traced;
}

// The model replays one step's collectives on every worker: traces whose workers disagree are bad
// data, named by the file of the first worker that differs (`files`: each program's).
void checkSameCollectives(const StepsOfAll& steps, const std::vector<std::string>& files) {
  for (const auto& programs : steps) {
    for (size_t w = 1; w < programs.size(); ++w) {
      if (sameCollectives(*programs[w], *programs[0])) continue;
      throw UserError(files[w] + ": step " + std::to_string(programs[w]->step) +
                      ": its collectives differ from those of the same step in " + files[0] +
                      "; every worker's trace of a step holds the same ones");
    }
  }
}

// A periodic run is predicted from its local steps and its sync steps: its window needs both.
void checkSyncWindow(const StepKinds& kinds, const SyncSchedule& schedule, const std::string& dir) {
  if (!schedule.periodic || (!kinds.local.empty() && !kinds.sync.empty())) return;
  const auto every = std::to_string(schedule.every);
  throw UserError(dir + ": its step timeline holds " + (kinds.sync.empty() ? "no sync step" : "no local step") +
                  " of its " + schedule.strategy + " schedule (a sync every " + every +
                  " steps); trace a window of more than " + every + " steps, e.g. output.trace=1-" +
                  std::to_string(2 * schedule.every));
}

}  // namespace

StepsOfAll commonSteps(const RunTimeline& timeline) {
  std::map<int64_t, std::vector<const StepProgram*>> by_step;
  for (const auto& worker : timeline.workers) {
    for (const auto& program : worker) by_step[program.step].push_back(&program);
  }
  StepsOfAll steps;
  for (auto& [step, programs] : by_step) {
    if (programs.size() == timeline.workers.size()) steps.push_back(std::move(programs));
  }
  return steps;
}

StepKinds kindsOf(StepsOfAll steps, const SyncSchedule& schedule) {
  StepKinds kinds;
  if (!schedule.periodic) {
    kinds.local = std::move(steps);
    return kinds;
  }
  for (auto& programs : steps) {
    if (programs.front()->step <= schedule.warmup_steps) continue;
    (programs.front()->collectives.empty() ? kinds.local : kinds.sync).push_back(std::move(programs));
  }
  return kinds;
}

RunTimeline loadRunTimeline(const outputs::RunData& run) {
  if (run.world_size < 1 || run.world_size > network::kMaxWorkers) {
    throw UserError(run.dir + "/run.json: world_size " + std::to_string(run.world_size) +
                    " is not a worker count; expected 1 to " + std::to_string(network::kMaxWorkers));
  }
  const auto traced = readTraces(run.dir);
  if (traced.files == 0 || traced.workers.empty()) {
    throw UserError(run.dir + ": no step timeline (trace-rank<r>.json); run it with --set output.trace=A-B, e.g. 5-15");
  }
  RunTimeline timeline;
  timeline.truncated = traced.truncated;
  // A simulated worker's own time between the spans is spent waiting for its turn.
  const bool simulated = traced.workers.size() > traced.files;
  // Simulated workers share one update, which the first applies while the others wait for it.
  const auto optimizer_times = optimizerTimes(traced.workers.begin()->second);
  std::vector<std::string> files;  // of timeline.workers
  for (const auto& [rank, worker] : traced.workers) {
    auto programs = stepPrograms(worker, !simulated, traced.summable, simulated ? &optimizer_times : nullptr);
    if (programs.empty()) continue;
    timeline.workers.push_back(std::move(programs));
    files.push_back(traced.file_of.at(rank));
  }
  const auto steps = commonSteps(timeline);
  if (steps.empty()) {
    throw UserError(run.dir +
                    ": its step timeline holds no complete step (forward, backward and reduce on every worker)");
  }
  checkSameCollectives(steps, files);
  timeline.schedule = syncScheduleOf(run);
  checkSyncWindow(kindsOf(steps, timeline.schedule), timeline.schedule, run.dir);
  return timeline;
}

TracedRuns traceRuns(std::vector<outputs::RunData> runs) {
  TracedRuns traced;
  // Many runs' traces (each up to its size bound) take a while: `gcrun predict` shows the reading.
  outputs::ProgressLine progress("reading the runs' traces", static_cast<int64_t>(runs.size()), "runs");
  for (auto& run : runs) {
    try {
      traced.timelines.push_back(loadRunTimeline(run));
      traced.runs.push_back(std::move(run));
    } catch (const UserError& e) {
      traced.untraced.push_back({std::move(run), e.what()});
    }
    progress.advance();
  }
  return traced;
}

}  // namespace gcrun::performance
