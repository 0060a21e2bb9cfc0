#include "tasks/data_location.h"

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

}  // namespace gcrun::tasks
