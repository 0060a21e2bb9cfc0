#pragma once

#include <vector>

#include "outputs/network/network_profile.h"
#include "outputs/performance/step_program.h"

namespace gcrun::performance {

// The time of one training step at `workers` workers, replayed from measured step programs.
//
// Assumptions (docs/predict.md, "When compression pays", says the same):
//  - Each worker computes what its program says, in order; worker w replays programs[w mod n],
//    so a 2-worker trace stands for any number of workers whose compute looks like it.
//  - A collective starts once every worker has issued it and the one before it has finished:
//    collectives run one after another on the network (one queue, in issue order), as bucket
//    all-reduces do in Gloo and on one NCCL stream. An all-reduce issued during backward runs
//    while backward goes on; a blocking one, and a wait, hold the worker until it is done.
//  - Its duration is collectiveSeconds() of its bytes and dtype at `workers`: the network's cost
//    alone. The compute around it is as measured: forward, backward and the optimizer times
//    `scale.compute`, the exchange's own compute (encode, decode, a sync's work) times `scale.codec`.
// The step ends when the last worker is done.
// total: until the last worker is done; the split is the busiest worker's (the most compute and
// codec), whose wait is the network's alone.
struct StepPrediction {
  double total_ms = 0;
  double compute_ms = 0;       // forward, backward, optimizer: the busiest worker's own
  double codec_ms = 0;         // its compute of the exchange (StepItem::Part::codec)
  double exposed_comm_ms = 0;  // the rest: time it waited for the network
  // Compute utilisation: the share of the step spent on forward, backward and the optimizer.
  double cu() const { return total_ms > 0 ? compute_ms / total_ms : 1; }
};

struct ComputeScale {
  double compute = 1;
  double codec = 1;
};

// `programs` share one step's collectives (same kinds, sizes and dtypes in the same order); a program
// whose collectives differ is an std::invalid_argument naming the step.
StepPrediction predictStep(const std::vector<const StepProgram*>& programs, int workers,
                           const network::NetworkProfile& profile, const ComputeScale& scale = {});

}  // namespace gcrun::performance
