#include "hyperparams/base/machine_memory.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace gcrun {

uint64_t physicalMemoryBytes() {
  return static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

uint64_t availableMemoryBytes() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    std::istringstream fields(line);
    std::string key;
    uint64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return kib << 10;
  }
  return physicalMemoryBytes();
}

}  // namespace gcrun
