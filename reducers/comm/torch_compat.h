#pragma once

// The few c10d differences between LibTorch 1.13 and 2.x, in one place. Included by .cpp files
// only: it pulls in the c10d backend headers.

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/version.h>
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

}  // namespace gcrun::comm::compat
