#pragma once

#include <functional>
#include <optional>
#include <string>

#include "reducers/comm/world.h"

namespace gcrun::launch {

using comm::WorldSpec;

// Reads one environment variable; nullopt when unset or empty. Tests pass a fake environment.
using EnvironmentLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvironmentLookup processEnvironment();

// The launchers gcrun understands, tried in this order; the first whose rank variable is set wins
// (torchrun's variables first, since torchrun itself may run under Slurm or mpirun):
//   torchrun and gcrun's own launcher: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE
//   Open MPI (mpirun):  OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
//   Slurm (srun):       SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE or the
//                       first count of SLURM_STEP_TASKS_PER_NODE ("4(x2)" -> 4)
// GCRUN_STORE_FILE (set by gcrun's one-machine launcher) replaces the TCP store by a FileStore;
// GCRUN_RUN_TOKEN (16+ characters, the same on every node) prefixes the group's keys.
// The store's address is MASTER_ADDR and MASTER_PORT; under Slurm they default to the first host
// of SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST) and port 29500. Returns a single-worker spec when
// no launcher's variables are set; throws UserError naming the variable when one is malformed,
// missing or inconsistent.
WorldSpec worldFromVariables(const EnvironmentLookup& lookup);

// The first host of a Slurm node list: "gpu[03-05,09],cpu1" -> "gpu03".
std::string firstSlurmHost(const std::string& nodelist);

// This process's place, from its own environment.
WorldSpec worldFromEnvironment();

constexpr const char* kStoreFileVariable = "GCRUN_STORE_FILE";
constexpr const char* kRunTokenVariable = "GCRUN_RUN_TOKEN";

// gcrun's launcher names the run directory it made (or resumes, holding its lock) for its workers
// in this variable: the one way the directory reaches them from the launcher. Rank 0 then tells
// the workers of other machines through the group.
constexpr const char* kLauncherRunDirVariable = "GCRUN_LAUNCHER_RUN_DIR";

// The directory in kLauncherRunDirVariable: set only in workers that gcrun's launcher started.
std::optional<std::string> launcherRunDirectory();

// The threads one worker of `world` uses: OMP_NUM_THREADS when set (torchrun sets it to 1, and
// OpenBLAS reads it too), else the machine's cores split between the workers on this machine (the
// launcher's local world size, whichever launcher it was).
int threadsPerWorker(const WorldSpec& world, const EnvironmentLookup& lookup, int cores);

}  // namespace gcrun::launch
