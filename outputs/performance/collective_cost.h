#pragma once

#include "outputs/network/network_profile.h"

namespace gcrun::performance {

// The time of one collective on a network profile, with the textbook cost models (Thakur,
// Rabenseifner and Gropp 2005; Patarasuk and Yuan 2009), for p workers, n bytes per worker, a
// latency alpha per message and beta seconds per byte:
//   all-reduce (ring: reduce-scatter, then all-gather):  2(p-1) alpha + 2(p-1)/p n beta
//   all-gather (ring; each worker receives (p-1) n):    (p-1) alpha + (p-1) n beta
//   broadcast (binomial tree):                          ceil(log2 p) (alpha + n beta)
//   barrier: an all-reduce of 4 bytes.
// Gloo's CPU all-reduce is a ring; a calibrated profile absorbs what the formulas leave out (the
// local reduction, copies, the protocol) into its fitted coefficients.
//
// The fits considered are those of the collective timed in `dtype` (the tensor's elements); if the
// profile has none, those timed in float32 (so a float32-only profile costs every dtype as before);
// an all-gather or broadcast, which moves bytes without arithmetic, then takes a fit of any dtype.
// Where the coefficients come from, first match wins:
//  1. a fit of this collective at this world size: its measured medians interpolated (linear
//     between neighbouring sizes, the last slope past the largest), else latency_s + seconds_per_byte n;
//  2. the fit of this collective at the nearest other world size: its alpha and beta are its
//     coefficients divided by the formula's factors at that size, then used at p;
//  3. a hand-written override for this collective (world_size 0), whatever the dtype: alpha =
//     latency, beta = its per-byte cost;
//  4. the profile's link: alpha = latency, beta = 1 / bandwidth.
// One worker sends nothing: 0. A profile with no coefficients for the collective is a UserError
// naming the profile, the collective and the dtype.
double collectiveSeconds(const network::NetworkProfile& profile, CollectiveKind collective, double bytes, int workers,
                         DataType dtype = DataType::float32);

// The formula's multipliers of alpha and of n beta, for p workers.
struct CostFactors {
  double latency = 0;
  double bytes = 0;
};
CostFactors costFactors(CollectiveKind collective, int workers);

// The profile's latency for break-even searches: the link's, else the all-reduce fit's alpha at
// the nearest world size to `workers` (a float32 fit if there is one), else 0.
double latencyOf(const network::NetworkProfile& profile, int workers);

// The bandwidth (bytes/s) the analytic CU formula divides by: the link's, else what the profile's
// all-reduce per-byte cost at `workers` (at least 2) is per link (its time for large messages over
// the ring's byte factor); 0 when it has none.
double bandwidthOf(const network::NetworkProfile& profile, int workers);

}  // namespace gcrun::performance
