#pragma once

#include <string>
#include <vector>

#include "hyperparams/base/sync_schedule.h"
#include "outputs/performance/step_program.h"
#include "outputs/report/run_data.h"

namespace gcrun::performance {

// A run's traced steps, by logical worker (global rank), read from its trace-rank<r>.json files.
struct RunTimeline {
  std::vector<std::vector<StepProgram>> workers;
  bool truncated = false;  // a trace file's size bound cut its recording short
  SyncSchedule schedule;   // the run's (syncScheduleOf)
};

// Reads every trace-rank<r>.json in `run.dir` (bounded reads; each file is data, checked by the
// trace reader). A UserError naming the file: a run with no trace file, or none with a complete
// step (with how to record one, output.trace); workers whose traces of one step hold different
// collectives; a run.json world_size outside 1 to network::kMaxWorkers (the default worker count);
// a run that syncs models every H steps whose traced steps are all sync steps or hold none (the
// model needs both: a window of more than H steps, e.g. output.trace=1-2H).
RunTimeline loadRunTimeline(const outputs::RunData& run);

// Runs with their step timelines, each run's traces read once (loadRunTimeline): a report, a
// study's prediction and its projected columns all predict from these.
struct TracedRuns {
  std::vector<outputs::RunData> runs;  // those with a timeline, in the order given
  std::vector<RunTimeline> timelines;  // runs[i]'s
  struct Untraced {
    outputs::RunData run;
    std::string why;  // loadRunTimeline's UserError
  };
  std::vector<Untraced> untraced;  // the others, in the order given
};
TracedRuns traceRuns(std::vector<outputs::RunData> runs);

// The steps every worker traced, each as one program per worker (in the timeline's order).
using StepsOfAll = std::vector<std::vector<const StepProgram*>>;
StepsOfAll commonSteps(const RunTimeline& timeline);

// A run's traced steps by what they sent: a periodic run's steps without a collective are local,
// the others its syncs (warm-up steps of every-step sync are neither); every step of any other
// run is a "local" one here (its median is the step).
struct StepKinds {
  StepsOfAll local, sync;
};
StepKinds kindsOf(StepsOfAll steps, const SyncSchedule& schedule);

}  // namespace gcrun::performance
