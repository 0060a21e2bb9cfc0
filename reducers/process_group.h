#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "reducers/communicator.h"

namespace gcrun::reducers {

// Where this worker sits and how to reach the others (the torchrun variables).
struct WorldSpec {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
};

// Reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT. Returns a single-worker spec when
// none is set; throws UserError naming the variable when one is set but malformed or inconsistent.
WorldSpec worldFromEnvironment();
// True when the torchrun variables say this process is one worker of a launched group.
bool launchedByLauncher();

// Joins the group: rank 0 hosts a c10d TCPStore at master_addr:master_port, every rank connects
// and builds the backend ("gloo" or "nccl"). A single worker needs no store or sockets.
std::unique_ptr<Communicator> connect(const WorldSpec& world, const std::string& backend,
                                      std::chrono::milliseconds timeout);

// A Gloo group over an existing store, bound to loopback: multi-rank tests in one process use it
// with a thread per rank over a shared HashStore or FileStore.
std::unique_ptr<Communicator> glooOverStore(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                            int world_size, std::chrono::milliseconds timeout);

// Backends this build can use, for error messages and `auto` resolution.
bool ncclAvailable();

}  // namespace gcrun::reducers
