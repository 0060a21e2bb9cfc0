#pragma once

#include <string>
#include <vector>

#include "experiments/bench/network_bench_request.h"
#include "outputs/network/network_profile.h"

namespace gcrun::experiments {

// As `gcrun experiment` runs: under a launcher's variables (torchrun, Slurm, mpirun or gcrun's own)
// this process is one worker; otherwise it starts this node's --nproc-per-node workers and returns
// their exit code (launch::launchLocalWorkers), each run with networkBenchArguments(request). Rank 0 prints the table
// and writes the profile. A group of one worker, a symlink at `output` and, with merge, an unreadable one are
// UserErrors, raised before anything is measured.
int runNetworkBench(const NetworkBenchRequest& request);

// What rank 0 writes: `fits` measured with `backend`, after those of `previous` that they do not
// replace (with merge), named `name`, else as `previous` is, else after the output file.
network::NetworkProfile calibratedProfile(const std::vector<network::Fit>& fits, const NetworkBenchRequest& request,
                                          const network::NetworkProfile* previous);

}  // namespace gcrun::experiments
