#include "tasks/data_location.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

namespace gcrun::tasks {

std::vector<std::string> defaultDataDirs(const std::string& folder) {
  std::vector<std::string> dirs;
  if (const char* root = std::getenv("GCRUN_DATA"); root && *root) dirs.push_back(std::string(root) + "/" + folder);
  dirs.push_back("data/" + folder);
  return dirs;
}

std::string resolveDataDir(const std::string& data_dir, const std::string& folder) {
  if (!data_dir.empty()) return data_dir;
  const auto dirs = defaultDataDirs(folder);
  for (const auto& dir : dirs) {
    std::error_code error;
    if (std::filesystem::is_directory(dir, error)) return dir;
  }
  return dirs.front();
}

std::string dataCacheKey(const TaskOptions& options, uint64_t seed, const std::string& dir) {
  if (!options.synthetic) return dir;
  return "synthetic " + std::to_string(seed) + " " + std::to_string(options.synthetic_samples);
}

SyntheticSizes syntheticSizes(const TaskOptions& options, SyntheticSizes defaults, int64_t held_out_divisor,
                              int64_t min_held_out) {
  if (options.synthetic_samples <= 0) return defaults;
  return {options.synthetic_samples, std::max(min_held_out, options.synthetic_samples / held_out_divisor)};
}

}  // namespace gcrun::tasks
