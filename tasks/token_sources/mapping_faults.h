#pragma once

#include <cstddef>
#include <string>

namespace gcrun::tasks {

// A token file is read through a memory mapping; should the file shrink while it is mapped (another
// process truncates or rewrites it in place), reading a page past its new end raises SIGBUS, which
// would kill the run with no word of why. While a MappedRegionWatch lives, a SIGBUS inside its region
// ends the process with one line on stderr naming the file, and exit status 1 (a runtime failure).
// A SIGBUS anywhere else keeps the behaviour it had before the first watch.
class MappedRegionWatch {
 public:
  MappedRegionWatch(const void* begin, size_t size, const std::string& path);
  ~MappedRegionWatch();
  MappedRegionWatch(const MappedRegionWatch&) = delete;
  MappedRegionWatch& operator=(const MappedRegionWatch&) = delete;

 private:
  int slot_ = -1;  // -1: the table was full, and this region is not watched
};

// How many regions are watched at once at most: one per token file of both splits.
inline constexpr size_t kMaxWatchedRegions = 8192;

}  // namespace gcrun::tasks
