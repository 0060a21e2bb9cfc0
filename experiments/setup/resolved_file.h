#pragma once

#include <string>

#include "experiments/setup/resolved_experiment.h"

namespace gcrun::experiments {

// The file gcrun's launcher writes for its workers (request.resolved_file): the resolved
// configuration and where each of its values came from, so that a worker's run.json names the
// user's sources although its command line holds none of them.
std::string resolvedFileText(const ResolvedExperiment& experiment);
// What a worker of gcrun's launcher starts from: that file read back, and resolve()d. Throws
// UserError for a file gcrun did not write.
ResolvedExperiment readResolvedFile(const std::string& path);

}  // namespace gcrun::experiments
