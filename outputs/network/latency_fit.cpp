// The calibration's fit: seconds = latency + seconds_per_byte * bytes, in relative terms.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "outputs/network/network_profile.h"

namespace gcrun::network {
namespace {

struct Line {
  double latency = 0;
  double per_byte = 0;
};

// Weighted sums over the samples, with weights 1 / seconds^2.
struct Moments {
  double w = 0, wx = 0, wt = 0, wxx = 0, wxt = 0;
  explicit Moments(const std::vector<Sample>& samples) {
    for (const auto& sample : samples) {
      const double weight = 1 / (sample.seconds * sample.seconds);
      w += weight;
      wx += weight * sample.bytes;
      wt += weight * sample.seconds;
      wxx += weight * sample.bytes * sample.bytes;
      wxt += weight * sample.bytes * sample.seconds;
    }
  }
};

// The unconstrained minimum, about the weighted means (the raw normal equations cancel badly when
// bytes span 4 B to 256 MiB).
Line unconstrained(const std::vector<Sample>& samples, const Moments& m) {
  const double mean_x = m.wx / m.w, mean_t = m.wt / m.w;
  double sxx = 0, sxt = 0;
  for (const auto& sample : samples) {
    const double weight = 1 / (sample.seconds * sample.seconds);
    sxx += weight * (sample.bytes - mean_x) * (sample.bytes - mean_x);
    sxt += weight * (sample.bytes - mean_x) * (sample.seconds - mean_t);
  }
  const double per_byte = sxt / sxx;
  return {mean_t - per_byte * mean_x, per_byte};
}

}  // namespace

Fit fitLatencyAndPerByte(CollectiveKind collective, int world_size, const std::vector<Sample>& samples) {
  const auto distinct = [&] {
    for (const auto& sample : samples) {
      if (sample.bytes != samples.front().bytes) return true;
    }
    return false;
  };
  if (samples.size() < 2 || !distinct()) throw std::invalid_argument("the fit needs samples of two or more sizes");
  for (const auto& sample : samples) {
    if (!(sample.seconds > 0) || !(sample.bytes >= 0)) {
      throw std::invalid_argument("the fit needs positive times and non-negative sizes");
    }
  }
  const Moments m(samples);
  Line line = unconstrained(samples, m);
  // A negative coefficient is noise, not physics: the best fit with it held at zero instead (each
  // one-coefficient fit below is a ratio of positive sums, so it is >= 0 itself).
  if (line.latency < 0) line = {0, m.wxt / m.wxx};
  if (line.per_byte < 0) line = {m.wt / m.w, 0};

  Fit fit;
  fit.collective = collective;
  fit.world_size = world_size;
  fit.latency_s = line.latency;
  fit.seconds_per_byte = line.per_byte;
  for (const auto& sample : samples) {
    const double predicted = line.latency + line.per_byte * sample.bytes;
    fit.max_relative_residual =
        std::max(fit.max_relative_residual, std::abs(predicted - sample.seconds) / sample.seconds);
  }
  return fit;
}

}  // namespace gcrun::network
