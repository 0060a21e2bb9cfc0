#pragma once

#include <filesystem>
#include <random>
#include <string>

namespace gcrun::testing {

// A fresh directory under the system temp dir, removed with everything in it when this goes away.
class TempDir {
 public:
  TempDir() {
    std::random_device device;
    path_ =
        std::filesystem::temp_directory_path() / ("gcrun-test-" + std::to_string(device()) + std::to_string(device()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace gcrun::testing
