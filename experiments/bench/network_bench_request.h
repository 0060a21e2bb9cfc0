#pragma once

#include <string>

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
  // collectives or dtypes) and its hand-written link.
  bool merge = false;
  launch::LaunchOptions launch;
};

}  // namespace gcrun::experiments
