#pragma once

#include <cstddef>
#include <deque>
#include <vector>

#include "experiments/study/study.h"
#include "experiments/study/study_options.h"
#include "outputs/study_directory.h"

namespace gcrun::experiments {

// What a run of a study needs next, judged from its directory (study_runner.cpp).
enum class Next { skip, resume, fresh };

struct ScheduledRun {
  size_t index = 0;  // in the plan
  Next next = Next::fresh;
};

// What the scheduler works in and with.
struct StudySchedule {
  const StudySpec& spec;
  const std::vector<StudyRun>& plan;
  const StudyOptions& options;  // jobs, nproc_per_node, plugins
  const outputs::StudyDirectory& study;
  int lock = -1;      // study.lock's descriptor, which each run inherits; -1: none
  bool whole = true;  // the whole study, not a Slurm array task's one run: study.json at each start and end
};

// Runs `todo` in order, options.jobs at once, each as its own `gcrun experiment` process (the
// study's plugins, nproc_per_node workers, OMP_NUM_THREADS its share of the cores unless the user
// set it, its output in logs/<run>.log, SIGTERM should this process die). A fresh run is marked as
// the study's (StudyDirectory::markRun) and starts from configs/<run>.yaml, the configuration the
// plan resolved for it; a resumed one from its own checkpoint. Each run's line in `record` follows
// it: running with one more attempt when it starts; when it ends, how (its exit code and run.json:
// completed, refused, interrupted or failed, with the error line) and how long it took, with a
// line and the study's progress printed. A signal stops starting runs and sends SIGTERM to those
// running (they stop after a checkpoint). Returns the signal, 0 for none, once every run started
// has ended.
int runSchedule(const StudySchedule& schedule, std::deque<ScheduledRun> todo, outputs::StudyRecord& record);

}  // namespace gcrun::experiments
