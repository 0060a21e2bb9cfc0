#pragma once

#include <cstdint>

namespace gcrun {

// The machine's physical memory, in bytes (sysconf): what a run's estimated size is held against.
uint64_t physicalMemoryBytes();

// What the kernel estimates can be allocated now without swapping (MemAvailable in /proc/meminfo,
// the kernel's own file, not data), or the physical memory where it does not say: what a file
// about to be loaded is held against.
uint64_t availableMemoryBytes();

}  // namespace gcrun
