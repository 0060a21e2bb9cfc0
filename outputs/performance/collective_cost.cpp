#include "outputs/performance/collective_cost.h"

#include <cmath>
#include <cstdlib>
#include <optional>

#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"

namespace gcrun::performance {
namespace {

using network::Fit;

// The measured fit of `collective` in `dtype` (any: nothing) at the world size nearest `workers`,
// the larger of two as near.
const Fit* nearestFit(const network::NetworkProfile& profile, CollectiveKind collective, int workers,
                      std::optional<DataType> dtype) {
  const Fit* best = nullptr;
  for (const auto& fit : profile.fits) {
    if (fit.collective != collective || fit.world_size < 2 || (dtype && fit.dtype != *dtype)) continue;
    if (!best || std::abs(fit.world_size - workers) < std::abs(best->world_size - workers) ||
        (std::abs(fit.world_size - workers) == std::abs(best->world_size - workers) &&
         fit.world_size > best->world_size)) {
      best = &fit;
    }
  }
  return best;
}

// The fit that costs `collective` in `dtype`: one timed in that dtype, else in float32; a
// collective that only moves bytes (all-gather, broadcast) costs the same in any, so any fit of it.
const Fit* measuredFit(const network::NetworkProfile& profile, CollectiveKind collective, int workers, DataType dtype) {
  if (const Fit* fit = nearestFit(profile, collective, workers, dtype)) return fit;
  if (const Fit* fit = nearestFit(profile, collective, workers, DataType::float32)) return fit;
  if (collective == CollectiveKind::all_reduce) return nullptr;
  return nearestFit(profile, collective, workers, std::nullopt);
}

const Fit* overrideOf(const network::NetworkProfile& profile, CollectiveKind collective) {
  for (const auto& fit : profile.fits) {
    if (fit.collective == collective && fit.world_size == 0) return &fit;
  }
  return nullptr;
}

// The measured medians, linear between neighbouring sizes; below the smallest its time (the
// latency floor), past the largest the last segment's slope.
double interpolate(const std::vector<network::Sample>& samples, double bytes) {
  if (bytes <= samples.front().bytes) return samples.front().seconds;
  size_t k = 1;
  while (k + 1 < samples.size() && samples[k].bytes < bytes) ++k;
  const auto& a = samples[k - 1];
  const auto& b = samples[k];
  const double slope = std::max(0.0, (b.seconds - a.seconds) / (b.bytes - a.bytes));
  return std::max(a.seconds, a.seconds + slope * (bytes - a.bytes));
}

}  // namespace

CostFactors costFactors(CollectiveKind collective, int workers) {
  const double p = workers;
  switch (collective) {
    case CollectiveKind::all_reduce:
    case CollectiveKind::barrier:  // an all-reduce of 4 bytes
      return {2 * (p - 1), 2 * (p - 1) / p};
    case CollectiveKind::all_gather:
      return {p - 1, p - 1};
    case CollectiveKind::broadcast: {
      const double hops = std::ceil(std::log2(p));
      return {hops, hops};
    }
  }
  return {};
}

double collectiveSeconds(const network::NetworkProfile& profile, CollectiveKind collective, double bytes, int workers,
                         DataType dtype) {
  if (workers <= 1) return 0;
  const auto at = costFactors(collective, workers);
  if (const Fit* fit = measuredFit(profile, collective, workers, dtype)) {
    if (fit->world_size == workers) {
      return fit->samples.size() >= 2 ? interpolate(fit->samples, bytes)
                                      : fit->latency_s + fit->seconds_per_byte * bytes;
    }
    const auto measured = costFactors(collective, fit->world_size);
    return at.latency * fit->latency_s / measured.latency + at.bytes * bytes * fit->seconds_per_byte / measured.bytes;
  }
  if (const Fit* given = overrideOf(profile, collective)) {
    return at.latency * given->latency_s + at.bytes * bytes * given->seconds_per_byte;
  }
  if (profile.bandwidth_bytes_per_s > 0) {
    return at.latency * profile.latency_s + at.bytes * bytes / profile.bandwidth_bytes_per_s;
  }
  // The file, where the profile came from one: its `name` is whatever the file says.
  const std::string which = profile.source.empty()
                                ? "network profile '" + clipForMessage(profile.name, 60) + "'"
                                : profile.source + " (network profile '" + clipForMessage(profile.name, 60) + "')";
  throw UserError(which + " gives no cost for " + collectiveName(collective) + " in " + dataTypeName(dtype) +
                  ": add a bandwidth and latency, or calibrate it with `gcrun bench network`");
}

double latencyOf(const network::NetworkProfile& profile, int workers) {
  if (profile.latency_s >= 0 && profile.bandwidth_bytes_per_s > 0) return profile.latency_s;
  const Fit* fit = nearestFit(profile, CollectiveKind::all_reduce, workers, DataType::float32);
  if (!fit) fit = nearestFit(profile, CollectiveKind::all_reduce, workers, std::nullopt);
  if (fit) {
    return fit->latency_s / costFactors(CollectiveKind::all_reduce, fit->world_size).latency;
  }
  return 0;
}

double bandwidthOf(const network::NetworkProfile& profile, int workers) {
  if (profile.bandwidth_bytes_per_s > 0) return profile.bandwidth_bytes_per_s;
  constexpr double kLarge = 64.0 * (1 << 20);
  const int at = std::max(2, workers);
  const double per_byte = (collectiveSeconds(profile, CollectiveKind::all_reduce, kLarge, at) -
                           collectiveSeconds(profile, CollectiveKind::all_reduce, 0, at)) /
                          kLarge / costFactors(CollectiveKind::all_reduce, at).bytes;
  return per_byte > 0 ? 1 / per_byte : 0;
}

}  // namespace gcrun::performance
