#pragma once

// The few c10d differences between LibTorch 1.13 and 2.x, in one place. Included by .cpp files
// only: it pulls in the c10d backend headers.

#include <torch/version.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef GCRUN_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace gcrun::comm::compat {

#if TORCH_VERSION_MAJOR >= 2
// 2.x: ProcessGroupGloo and ProcessGroupNCCL are Backends behind a dispatching ProcessGroup.
using CollectiveGroup = c10d::Backend;
#else
// 1.13: they are ProcessGroups themselves.
using CollectiveGroup = c10d::ProcessGroup;
#endif

// 2.4 made the libuv TCPStore the default. A LibTorch built without libuv (Debian 13's 2.6) then
// reports every failure to host the store as "use_libuv was requested but PyTorch was build
// without libuv support" rather than its cause (a busy port); the classic store, which every
// build has and 1.13 always uses, says what went wrong.
inline void useClassicTcpStore(c10d::TCPStoreOptions& options) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2)
  options.useLibUV = false;
#endif
}

}  // namespace gcrun::comm::compat
