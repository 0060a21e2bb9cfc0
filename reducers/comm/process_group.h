#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "reducers/comm/communicator.h"
#include "reducers/comm/world.h"

namespace gcrun::comm {

// Joins the group: rank 0 hosts a c10d TCPStore at master_addr:master_port (unless torchrun's agent
// hosts it), every rank connects within `timeout` and builds the backend ("gloo" or "nccl"). A
// single worker needs no store or sockets. A store that cannot be reached throws naming its address.
std::unique_ptr<Communicator> connect(const WorldSpec& world, const std::string& backend,
                                      std::chrono::milliseconds timeout);

// `workers` Gloo ranks in this process, for simulated workers (distributed.simulated_workers):
// ranks world.rank * workers + w of world.world_size * workers, over the group's store (rank 0's
// TCPStore, or one in this process when it is alone). The groups are built side by side (building
// one waits for all its peers); a failure throws naming the rank.
std::vector<std::unique_ptr<Communicator>> connectSimulated(const WorldSpec& world, int workers,
                                                            std::chrono::milliseconds timeout);

// A Gloo group over an existing store, bound to loopback: multi-rank tests in one process use it
// with a thread per rank over a shared HashStore or FileStore.
std::unique_ptr<Communicator> glooOverStore(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
                                            std::chrono::milliseconds timeout);

// Tells which peer failed after a collective error. Each worker bumps its own heartbeat counter in
// the group's store every half second from a thread with its own store connection; a worker whose
// counter stands still for two seconds is gone. A store that cannot be reached any more means its
// host (rank 0, or torchrun's agent) is gone.
class PeerMonitor {
 public:
  virtual ~PeerMonitor() = default;
  // One line naming the failed ranks (or the store's host); "" when every peer is alive, so the
  // error is this worker's own. Waits about two seconds.
  virtual std::string diagnose() = 0;
};
// Starts this worker's heartbeat; nullptr for a single worker.
std::unique_ptr<PeerMonitor> monitorPeers(const WorldSpec& world, std::chrono::milliseconds timeout);

// Backends this build can use, for error messages and `auto` resolution.
bool ncclAvailable();

}  // namespace gcrun::comm
