#pragma once

#include <cstddef>
#include <string>

#include "experiments/study/study.h"
#include "experiments/study/study_options.h"

namespace gcrun::experiments {

// DIR/slurm.sbatch for the study in `dir` of `count` runs: a job array with one task per run, each
// task `srun gcrun study ... --only $SLURM_ARRAY_TASK_ID` with the study's --set and --plugin
// options, every value on that line quoted for the shell. A name that the script cannot hold (a
// newline or control character anywhere, a space on an #SBATCH line) is a UserError, raised
// before anything is written.
std::string slurmScript(const StudySpec& spec, const StudyOptions& options, const std::string& dir, size_t count);

}  // namespace gcrun::experiments
