#pragma once

#include <functional>
#include <optional>
#include <string>

namespace gcrun::reducers {

// Where this worker sits and how to reach the others.
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
  // The launcher whose variables described this worker ("" when none did).
  std::string launcher;
};

// Reads one environment variable; nullopt when unset or empty. Tests pass a fake environment.
using EnvironmentLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvironmentLookup processEnvironment();

// The launchers gcrun understands, tried in this order; the first whose rank variable is set wins
// (torchrun's variables first, since torchrun itself may run under Slurm or mpirun):
//   torchrun and gcrun's own launcher: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE
//   Open MPI (mpirun):  OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
//   Slurm (srun):       SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE or the
//                       first count of SLURM_STEP_TASKS_PER_NODE ("4(x2)" -> 4)
// The store's address is MASTER_ADDR and MASTER_PORT; under Slurm they default to the first host
// of SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST) and port 29500. Returns a single-worker spec when
// no launcher's variables are set; throws UserError naming the variable when one is malformed,
// missing or inconsistent.
WorldSpec worldFromVariables(const EnvironmentLookup& lookup);

// The first host of a Slurm node list: "gpu[03-05,09],cpu1" -> "gpu03".
std::string firstSlurmHost(const std::string& nodelist);

}  // namespace gcrun::reducers
