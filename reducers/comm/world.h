#pragma once

#include <string>

namespace gcrun::comm {

// Where this worker sits and how to reach the others. experiments/launch/ fills it in from the
// launcher's environment variables; connect() joins the group it describes.
struct WorldSpec {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // torchrun's static rendezvous hosts the store in its agent (TORCHELASTIC_USE_AGENT_STORE=True):
  // then every worker, rank 0 included, connects as a client.
  bool agent_store = false;
  // torchrun's TORCHELASTIC_RESTART_COUNT: each attempt keeps its keys apart in a reused store.
  int restart_count = 0;
  // A FileStore instead of rank 0's TCPStore: gcrun's launcher on one machine puts it in a private
  // directory (GCRUN_STORE_FILE), so that no store listens on any network interface.
  std::string store_file;
  // Prefixes every key of the group (GCRUN_RUN_TOKEN): a client that does not know it can neither
  // join the group nor write a key that a worker reads.
  std::string run_token;
  // The launcher whose variables described this worker ("" when none did).
  std::string launcher;

  bool launched() const { return !launcher.empty(); }
};

}  // namespace gcrun::comm
