#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hyperparams/base/collective.h"
#include "outputs/network/network_profile.h"

namespace gcrun::planning {

// One configuration as `gcrun plan` models it: when it sends, what, and how each send overlaps.
// The bits come from the reducer's own accounting (reducers/planned_bits.h), per bucket or per
// fragment; nothing here knows a reducer.
struct PlannedMethod {
  std::string configuration;
  std::string strategy;
  std::string reducer;
  int64_t sync_every = 1;  // H; 1 for a strategy that exchanges every step
  int64_t fragments = 1;   // F
  int64_t delay = 0;       // τ: steps a send may run behind before it is applied (0: it blocks)
  bool periodic = false;
  CollectiveKind collective = CollectiveKind::all_reduce;
  DataType dtype = DataType::float32;
  // Every step: one message per gradient bucket, in backward order, each with the share of the
  // backward pass done when its gradients are ready. Periodic: one message per fragment (diloco:
  // one), sent at its own step of the period (sendOffset), `ready` unused.
  std::vector<double> message_bits;
  std::vector<double> ready;
  // The gradient elements each message carries, and the codec's encode plus decode time per
  // element (0: not modelled): an exchange takes its transfer plus elements x that, on the
  // exchange's path (a codec that alone outlasts the compute makes a CU unreachable).
  std::vector<double> message_elements;
  double codec_s_per_element = 0;
};

// A worker's compute per step: forward then backward (backward_share of the time), gradients
// ready during backward; the optimizer's time is in the step's.
struct ComputeModel {
  double step_s = 0.1;
  double backward_share = 2.0 / 3.0;
};

// What one configuration costs at W workers on one network.
struct StepEstimate {
  double step_s = 0;         // wall-clock time per step, averaged over a period
  double cu = 0;             // compute / wall-clock
  double bits_per_step = 0;  // one worker's message bits per step, averaged over a period
  double bits_per_sync = 0;  // one exchange's (a step's, diloco's sync, a fragment's)
  // Bits on one worker's link (the ring's or all-gather's factor applied) over the step's time,
  // and over the time of the largest exchange.
  double average_bit_per_s = 0;
  double peak_bit_per_s = 0;
};

StepEstimate estimateStep(const PlannedMethod& method, const ComputeModel& compute,
                          const network::NetworkProfile& network, int workers);

// The searched bandwidths, bits per second: 1 Mbit/s to 100 Tbit/s.
inline constexpr double kLowestBitPerS = 1e6;
inline constexpr double kHighestBitPerS = 1e14;

// The slowest link (bits per second, latency `latency_s`) at which `method` reaches `cu`: nothing
// when even 100 Tbit/s does not (latency alone prevents it); 1 Mbit/s when that already does.
std::optional<double> bandwidthFor(double cu, const PlannedMethod& method, const ComputeModel& compute,
                                   double latency_s, int workers);

}  // namespace gcrun::planning
