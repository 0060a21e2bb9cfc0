// The calibration's fit on synthetic timings.
#include <cmath>
#include <stdexcept>

#include <gtest/gtest.h>

#include "outputs/network/network_profile.h"

namespace gcrun::network {
namespace {

std::vector<Sample> line(double latency, double per_byte, const std::vector<double>& noise = {}) {
  std::vector<Sample> samples;
  double bytes = 4;
  for (size_t i = 0; bytes <= 268435456; ++i, bytes *= 4) {
    const double factor = i < noise.size() ? 1 + noise[i] : 1;
    samples.push_back({bytes, (latency + per_byte * bytes) * factor});
  }
  return samples;
}

TEST(LatencyFit, AnExactLineRecoversItsCoefficients) {
  const auto fit = fitLatencyAndPerByte(CollectiveKind::all_gather, 4, line(8e-5, 1.7e-8));
  EXPECT_EQ(fit.collective, CollectiveKind::all_gather);
  EXPECT_EQ(fit.world_size, 4);
  EXPECT_NEAR(fit.latency_s, 8e-5, 8e-5 * 1e-9);
  EXPECT_NEAR(fit.seconds_per_byte, 1.7e-8, 1.7e-8 * 1e-9);
  EXPECT_LT(fit.max_relative_residual, 1e-9);
}

TEST(LatencyFit, NoisyPointsStayCloseAndReportTheirResidual) {
  const std::vector<double> noise = {0.05, -0.04, 0.03, -0.05, 0.02, 0.04,  -0.03,
                                     0.01, -0.02, 0.05, -0.01, 0.03, -0.04, 0.02};
  const auto fit = fitLatencyAndPerByte(CollectiveKind::all_reduce, 2, line(5e-5, 8e-9, noise));
  EXPECT_NEAR(fit.latency_s, 5e-5, 5e-5 * 0.06);
  EXPECT_NEAR(fit.seconds_per_byte, 8e-9, 8e-9 * 0.06);
  EXPECT_GT(fit.max_relative_residual, 0.01);
  EXPECT_LT(fit.max_relative_residual, 0.11);
}

// The relative weights: a small message's 10% error counts as much as a large one's.
TEST(LatencyFit, SmallMessagesCountAsMuchAsLargeOnes) {
  auto samples = line(1e-4, 1e-9);
  samples.front().seconds *= 2;  // one slow small message
  const auto fit = fitLatencyAndPerByte(CollectiveKind::broadcast, 2, samples);
  EXPECT_GT(fit.latency_s, 1e-4);
  EXPECT_NEAR(fit.seconds_per_byte, 1e-9, 1e-9 * 0.01);
}

TEST(LatencyFit, ANegativeInterceptIsRefittedAtZero) {
  // Through the origin but for the small sizes, which lie below it: unconstrained, latency < 0.
  std::vector<Sample> samples = {{1000, 0.5e-6}, {2000, 1.5e-6}, {4000, 3.5e-6}, {8000, 7.5e-6}};
  const auto fit = fitLatencyAndPerByte(CollectiveKind::all_reduce, 2, samples);
  EXPECT_EQ(fit.latency_s, 0);
  double wxt = 0, wxx = 0;
  for (const auto& s : samples) {
    wxt += s.bytes * s.seconds / (s.seconds * s.seconds);
    wxx += s.bytes * s.bytes / (s.seconds * s.seconds);
  }
  EXPECT_DOUBLE_EQ(fit.seconds_per_byte, wxt / wxx);
}

TEST(LatencyFit, ANegativeSlopeIsRefittedAtZero) {
  std::vector<Sample> samples = {{4, 2e-4}, {64, 1.5e-4}, {1024, 1e-4}};
  const auto fit = fitLatencyAndPerByte(CollectiveKind::broadcast, 2, samples);
  EXPECT_EQ(fit.seconds_per_byte, 0);
  EXPECT_GT(fit.latency_s, 1e-4);
  EXPECT_LT(fit.latency_s, 2e-4);
}

TEST(LatencyFit, RefusesTooFewSizesAndNonPositiveTimes) {
  EXPECT_THROW(fitLatencyAndPerByte(CollectiveKind::all_reduce, 2, {{4, 1e-4}}), std::invalid_argument);
  EXPECT_THROW(fitLatencyAndPerByte(CollectiveKind::all_reduce, 2, {{4, 1e-4}, {4, 2e-4}}), std::invalid_argument);
  EXPECT_THROW(fitLatencyAndPerByte(CollectiveKind::all_reduce, 2, {{4, 1e-4}, {8, 0}}), std::invalid_argument);
}

}  // namespace
}  // namespace gcrun::network
