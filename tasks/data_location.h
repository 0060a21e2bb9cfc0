#pragma once

#include <string>
#include <vector>

namespace gcrun::tasks {

// Where a task looks for its files when task.data_dir is empty: $GCRUN_DATA/<folder> when the
// environment variable GCRUN_DATA is set, then ./data/<folder> (relative to the working
// directory). Returns the candidates in that order.
std::vector<std::string> defaultDataDirs(const std::string& folder);

// task.data_dir when set; otherwise the first default candidate that exists, or the first
// candidate when none does (so that the "missing file" error names it).
std::string resolveDataDir(const std::string& data_dir, const std::string& folder);

}  // namespace gcrun::tasks
