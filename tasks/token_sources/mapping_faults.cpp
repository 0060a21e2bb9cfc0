#include "tasks/token_sources/mapping_faults.h"

#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "hyperparams/base/process.h"

namespace gcrun::tasks {
namespace {

// A slot is published by storing `begin` last, and retired by clearing it first, so that the
// handler, which takes no lock and allocates nothing, reads a whole path. Paths live in the slot
// (static storage: a slot's pages are touched only once used), so retiring frees nothing.
constexpr size_t kPathBytes = 512;
struct Slot {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  char path[kPathBytes] = {};
};

std::array<Slot, kMaxWatchedRegions> slots;
std::mutex registration;  // claims and frees slots; never taken by the handler
struct sigaction previous_action {};

// The watched region's path that holds `address`; nullptr when none does.
const char* watchedPathAt(uintptr_t address) {
  for (const Slot& slot : slots) {
    const uintptr_t begin = slot.begin.load();
    if (begin != 0 && address >= begin && address < slot.end.load()) return slot.path;
  }
  return nullptr;
}

// Async-signal-safe: atomics, write(2), _exit(2), sigaction(2) and raise(3) only.
void onBusError(int signal, siginfo_t* info, void*) {
  const bool from_a_fault = info->si_code > 0;  // not kill(2) or raise(3), whose si_addr means nothing
  if (const char* path = from_a_fault ? watchedPathAt(reinterpret_cast<uintptr_t>(info->si_addr)) : nullptr) {
    process::writeToStderrRaw("gcrun: ");
    process::writeToStderrRaw(path);
    process::writeToStderrRaw(
        " shrank while this run read it through a memory mapping (truncated or rewritten in place); "
        "the run cannot go on: leave token files unchanged while a run uses them\n");
    ::_exit(1);
  }
  // Not in a watched region: the handler there was before takes it. A fault repeats by itself
  // once this handler returns; a sent signal is sent again (delivered on return, when unblocked).
  ::sigaction(signal, &previous_action, nullptr);
  if (!from_a_fault) ::raise(signal);
}

void installHandlerOnce() {
  static std::once_flag installed;
  std::call_once(installed, [] {
    struct sigaction action {};
    action.sa_sigaction = onBusError;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &previous_action);
  });
}

}  // namespace

MappedRegionWatch::MappedRegionWatch(const void* begin, size_t size, const std::string& path) {
  if (begin == nullptr || size == 0) return;
  installHandlerOnce();
  const std::lock_guard<std::mutex> lock(registration);
  for (size_t i = 0; i < slots.size(); ++i) {
    Slot& slot = slots[i];
    if (slot.begin.load() != 0) continue;
    // A longer path keeps its first kPathBytes - 1 bytes: enough to find the file.
    std::strncpy(slot.path, path.c_str(), kPathBytes - 1);
    slot.end.store(reinterpret_cast<uintptr_t>(begin) + size);
    slot.begin.store(reinterpret_cast<uintptr_t>(begin));
    slot_ = static_cast<int>(i);
    return;
  }
}

MappedRegionWatch::~MappedRegionWatch() {
  if (slot_ < 0) return;
  const std::lock_guard<std::mutex> lock(registration);
  slots[static_cast<size_t>(slot_)].begin.store(0);
}

}  // namespace gcrun::tasks
