#pragma once

#include <string>
#include <vector>

namespace gcrun::experiments {

// Starts `nproc` workers on this machine, as torchrun's local agent does: each is this executable
// run again with `argv`, and RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR (loopback)
// and MASTER_PORT (a free port) in its environment. Waits for all of them. When one fails, the
// others are stopped (SIGTERM, then SIGKILL after a grace period) and its exit code is returned;
// SIGINT and SIGTERM sent to the launcher are passed on to the workers. Returns 0 when all succeed.
int launchLocalWorkers(int nproc, const std::vector<std::string>& argv);

}  // namespace gcrun::experiments
