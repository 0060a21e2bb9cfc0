#pragma once

#include <string>
#include <vector>

namespace gcrun::launch {

// This node's part of a launch, with torchrun's meaning.
// The most worker processes one machine's launcher starts (--nproc-per-node).
inline constexpr int kMaxProcessesPerNode = 1024;

struct LaunchOptions {
  int nproc_per_node = 1;
  // Whether the user gave --nproc-per-node: a resume on one machine without it starts as many
  // workers as its checkpoint was written by.
  bool nproc_per_node_given = false;
  int nnodes = 1;
  int node_rank = 0;
  // Rank 0's store. Empty address and port 0 (one node only): loopback and a free port.
  std::string master_addr;
  int master_port = 0;
  // Where to write workers.json (rank, local rank and pid of this node's workers); empty: nowhere.
  std::string run_dir;
};

// A directory only this user can enter (mkdtemp under $TMPDIR), removed with everything in it
// when the object goes: for what a launcher hands its workers on this machine alone (the
// one-machine group's FileStore: with no store listening on a port, no other machine or user can
// reach the group). A TMPDIR it cannot create it in is a UserError naming TMPDIR.
class PrivateDirectory {
 public:
  PrivateDirectory();
  ~PrivateDirectory();
  PrivateDirectory(const PrivateDirectory&) = delete;
  PrivateDirectory& operator=(const PrivateDirectory&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Starts this node's workers, as torchrun's local agent does: each is this executable run again
// with `argv`, and RANK (node_rank * nproc_per_node + local rank), LOCAL_RANK, WORLD_SIZE,
// LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR and MASTER_PORT in its environment. On one node
// (nnodes 1) the group's store is a file in a private temporary directory (GCRUN_STORE_FILE), removed
// when the workers are done; across nodes it is rank 0's TCP store. Waits for all of
// them. When one fails, the others are stopped (SIGTERM, then SIGKILL after a grace period that
// leaves them time to report and checkpoint) and its exit code is returned; SIGINT and SIGTERM
// sent to the launcher are passed on to the workers as SIGTERM and it returns 128 + the signal.
// Returns 0 when all succeed.
int launchLocalWorkers(const LaunchOptions& options, const std::vector<std::string>& argv);

}  // namespace gcrun::launch
