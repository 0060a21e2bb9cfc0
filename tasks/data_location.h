#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hyperparams/config.h"

namespace gcrun::tasks {

// Where a task looks for its files when task.data_dir is empty: $GCRUN_DATA/<folder> when the
// environment variable GCRUN_DATA is set, then ./data/<folder> (relative to the working
// directory). Returns the candidates in that order.
std::vector<std::string> defaultDataDirs(const std::string& folder);

// task.data_dir when set; otherwise the first default candidate that exists, or the first
// candidate when none does (so that the "missing file" error names it).
std::string resolveDataDir(const std::string& data_dir, const std::string& folder);

// What names a task's data in its process-wide cache (ranks run as threads share one copy): the
// directory, or for synthetic data the seed and task.synthetic_samples.
std::string dataCacheKey(const TaskOptions& options, uint64_t seed, const std::string& dir);

// How many samples each split of a task's synthetic data has.
struct SyntheticSizes {
  int64_t train;
  int64_t held_out;  // each held-out split (test, validation)
};
// `defaults` when task.synthetic_samples is 0; otherwise that many training samples, and a
// `held_out_divisor`-th of them (at least `min_held_out`) per held-out split.
SyntheticSizes syntheticSizes(const TaskOptions& options, SyntheticSizes defaults, int64_t held_out_divisor,
                              int64_t min_held_out);

}  // namespace gcrun::tasks
