#pragma once

#include "experiments/study/study.h"
#include "experiments/study/study_options.h"

namespace gcrun::experiments {

// Runs every run of the study that is not done yet, each as its own `gcrun experiment` process in
// DIR/runs/<config>-seed<k> (its console output in DIR/logs/), `jobs` at once; DIR is an
// outputs::StudyDirectory, which names and writes every file in it. In three steps:
//  - plan: what each run needs next, from its directory. A fresh run starts from the configuration
//    the plan resolved for it, written to DIR/configs/<config>-seed<k>.yaml (`gcrun experiment
//    <preset> --config` that file), so that it runs with exactly the settings its config.yaml is
//    later checked against. A completed run is skipped (if its config.yaml is not what the study
//    asks for now, the study is refused: another --output-dir is needed); an interrupted one, or
//    one whose process died, resumes from its checkpoint; one without a checkpoint, or that
//    failed, runs again from the start;
//  - schedule (study_schedule.h): the runs start and end; each start and end is recorded in
//    DIR/study.json (status, exit code, attempts, seconds, and the error from its run.json, where
//    a refused run records its refusal too) and each end printed with the study's progress; a run
//    that fails does not stop the others;
//  - report: once, when the runs have ended (report.md, report.csv, report.html, plots/, and with
//    `predict:` DIR/predict/), each run's files and traces read once. A study stopped early still
//    writes it: by a signal (SIGINT and SIGTERM stop the runs after a checkpoint) or a failed run
//    once the others have ended, by an error of the study's own (a log it may not write) for the
//    runs that had ended before it.
// A second study on the same DIR waits for the first (a lock). A Slurm array task (`only`) runs its
// one run and writes neither study.json nor the report. Returns 0 when every run completed, 128 +
// the signal when one stopped the study; throws std::runtime_error naming the failed runs otherwise.
int runStudy(const StudySpec& spec, const StudyOptions& options);

}  // namespace gcrun::experiments
