#pragma once

#include <string>
#include <vector>

#include "experiments/bench/network_calibration.h"
#include "experiments/launch/launcher.h"
#include "outputs/run_directory.h"

namespace gcrun::experiments {

// `gcrun bench network`: where its workers come from, what they measure and where rank 0 writes
// the profile.
struct NetworkBenchRequest {
  CalibrationPlan plan;
  std::string backend = "gloo";
  int timeout_s = 300;
  std::string output = outputs::run_files::kNetworkProfile;
  std::string name;  // empty: the output file's stem
  // Keep the fits in an existing `output` that this run does not replace (other world sizes,
  // other collectives) and its hand-written link.
  bool merge = false;
  launch::LaunchOptions launch;
};

// The arguments after the program's name that `gcrun bench network` parses back into `request`,
// for the workers gcrun's launcher starts.
std::vector<std::string> networkBenchArguments(const NetworkBenchRequest& request);

// As `gcrun experiment` runs: under a launcher's variables (torchrun, Slurm, mpirun or gcrun's own)
// this process is one worker; otherwise it starts this node's --nproc-per-node workers and returns
// their exit code (launch::launchLocalWorkers). Rank 0 prints the table and writes the profile.
// A group of one worker, a symlink at `output` and, with merge, an unreadable one are UserErrors,
// raised before anything is measured.
int runNetworkBench(const NetworkBenchRequest& request);

// What rank 0 writes: `fits` measured with `backend`, after those of `previous` that they do not
// replace (with merge), named `name`, else as `previous` is, else after the output file.
network::NetworkProfile calibratedProfile(const std::vector<network::Fit>& fits, const NetworkBenchRequest& request,
                                          const network::NetworkProfile* previous);

}  // namespace gcrun::experiments
