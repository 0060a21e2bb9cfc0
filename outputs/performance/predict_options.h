#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "outputs/network/network_profile.h"
#include "outputs/report/target.h"

namespace gcrun::performance {

// The compute a prediction replays: the run's own as traced; with `codec_too` (--compute-ms-per-batch:
// another device) every step scaled by one factor, so that its median forward, backward and
// optimizer take `ms_per_batch`, the exchange's own compute (codec, a sync's work) alike; without
// (a compute profile shared by runs of one model) every step of every worker computing exactly
// `ms_per_batch`, each run keeping its own codec.
struct ComputeBasis {
  double ms_per_batch = 0;
  bool codec_too = true;
};

// Which compute the runs replay (computeBases).
struct ComputeChoice {
  double compute_ms_per_batch = 0;  // > 0: forward, backward, optimizer and codec scaled to this compute
  // Runs of one comparison (task, model, batch) replay one compute at every step: the median over
  // them of each run's median forward+backward+optimizer, so that a busy machine during one run
  // does not decide the answer (a run alone in its comparison keeps its own). false: each its own
  // (the check of a prediction against the run's measurement).
  bool shared_compute = true;
};

// Where to predict each run (predictRows): every H x worker count x network.
struct PredictGrid {
  std::vector<int> workers;  // empty: each run's own world size
  std::vector<network::NetworkProfile> networks;
  // What-ifs over H for runs that sync models every H steps (their own H when empty); runs that
  // exchange every step are predicted once whatever these say.
  std::vector<int64_t> sync_every;
  std::optional<outputs::Target> target;  // steps and time to reach it, at a run's own H
};

// --quality-tolerance: how much worse than the best configuration's final metric a method may
// train and still be named fastest (quality_rule.h). A share: points of a metric where higher is
// better (0.01 = 1 point of accuracy), a share of the best value where lower is better (0.01 = 1%
// of the loss); never tighter than the best configuration's spread over its seeds.
inline constexpr double kDefaultQualityTolerance = 0.01;
struct QualityTolerance {
  bool weighed = true;  // false: --quality-tolerance off, speed per step alone
  double share = kDefaultQualityTolerance;
};

// `gcrun predict`'s options, each parsed once where they are read; each step of a prediction
// takes the part it needs.
struct PredictOptions : PredictGrid, ComputeChoice {
  std::optional<double> target_cu;  // --target-cu: recommend the cheapest configuration reaching it
  QualityTolerance quality;         // --quality-tolerance
};

// --compute-ms-per-batch and --predict compute_ms: a plain decimal above 0 up to this.
inline constexpr double kMaxComputeMsPerBatch = 1e6;
double parseComputeMsPerBatch(const std::string& text, const std::string& what);
// A worker count to predict at: a whole number from 1 to network::kMaxWorkers.
int parseWorkerCount(const std::string& text, const std::string& what);
// --sync-every: H, a whole number from 1 to kMaxSyncEvery.
int64_t parseSyncEvery(const std::string& text, const std::string& what);
// --target-cu: a compute utilisation above 0 up to 1.
double parseTargetCu(const std::string& text, const std::string& what);
// --quality-tolerance: "off", or a share from 0 up to 1, e.g. 0.02.
QualityTolerance parseQualityTolerance(const std::string& text, const std::string& what);
// --compute-profile: "shared" (true) or "own" (false).
bool parseComputeProfile(const std::string& text, const std::string& what);

}  // namespace gcrun::performance
