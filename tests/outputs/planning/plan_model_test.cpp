// gcrun plan's step model on links worked out by hand: every-step buckets overlapping backward,
// diloco's blocking sync spread over H, streaming-diloco's fragments hidden behind sync.delay
// steps until the link's queue cannot keep up, and the bandwidth search's ends.
#include <gtest/gtest.h>

#include "outputs/planning/plan_model.h"

namespace gcrun::planning {
namespace {

// 1 Gbit/s without latency: 1e9 bits take 1 s; a ring all-reduce at 2 workers sends n bytes.
const auto kLink = network::linkProfile(1e9 / 8, 0);
const ComputeModel kCompute{1.0, 2.0 / 3.0};

PlannedMethod everyStep(std::vector<double> bits, std::vector<double> ready) {
  PlannedMethod method{"m", "every-step", "exact"};
  method.message_bits = std::move(bits);
  method.ready = std::move(ready);
  return method;
}

PlannedMethod periodic(int64_t every, int64_t fragments, int64_t delay, double bits_each) {
  PlannedMethod method{"m", "streaming-diloco", "exact", every, fragments, delay, true};
  method.message_bits.assign(static_cast<size_t>(fragments), bits_each);
  return method;
}

TEST(PlanModel, EveryStepBucketsOverlapBackwardOnOneLink) {
  // Two buckets of 0.2 s each, ready half-way through backward (at 2/3 s) and at its end (1 s):
  // the first ends at 0.867 s, the second at 1.2 s.
  const auto estimate = estimateStep(everyStep({2e8, 2e8}, {0.5, 1.0}), kCompute, kLink, 2);
  EXPECT_NEAR(estimate.step_s, 1.2, 1e-9);
  EXPECT_NEAR(estimate.cu, 1 / 1.2, 1e-9);
  EXPECT_DOUBLE_EQ(estimate.bits_per_step, 4e8);
  // Hidden entirely when the buckets fit in backward.
  EXPECT_NEAR(estimateStep(everyStep({1e8, 1e8}, {0.25, 0.5}), kCompute, kLink, 2).step_s, 1.0, 1e-9);
}

TEST(PlanModel, DilocoBlocksOncePerPeriod) {
  // A 2 s sync every 10 steps of 1 s: 1.2 s a step.
  const auto estimate = estimateStep(periodic(10, 1, 0, 2e9), kCompute, kLink, 2);
  EXPECT_NEAR(estimate.step_s, 1.2, 1e-9);
  EXPECT_DOUBLE_EQ(estimate.bits_per_step, 2e8);
  EXPECT_DOUBLE_EQ(estimate.bits_per_sync, 2e9);
}

TEST(PlanModel, StreamingFragmentsHideBehindTheirDelayUntilTheLinkIsFull) {
  // 4 fragments of 0.5 s every 12 steps, each allowed 2 steps: hidden.
  EXPECT_NEAR(estimateStep(periodic(12, 4, 2, 5e8), kCompute, kLink, 2).step_s, 1.0, 1e-9);
  // Of 2.5 s each: each waits 0.5 s at its landing step, 2 s a period of 12 steps.
  EXPECT_NEAR(estimateStep(periodic(12, 4, 2, 2.5e9), kCompute, kLink, 2).step_s, 14.0 / 12, 1e-9);
  // Without the delay they block: 4 x 2.5 s a period.
  EXPECT_NEAR(estimateStep(periodic(12, 4, 0, 2.5e9), kCompute, kLink, 2).step_s, 22.0 / 12, 1e-9);
}

TEST(PlanModel, BandwidthSearchFindsTheLinkAndSaysWhenLatencyForbidsIt) {
  // diloco's 2e9-bit sync every 10 steps reaches CU 0.8 when it takes at most 2.5 s: 0.8 Gbit/s.
  const auto needed = bandwidthFor(0.8, periodic(10, 1, 0, 2e9), kCompute, 0, 2);
  ASSERT_TRUE(needed.has_value());
  EXPECT_NEAR(*needed / 0.8e9, 1.0, 1e-3);
  // 2 (p - 1) latencies of 1 s per all-reduce at 2 workers: CU at most 10 / 12 whatever the link.
  EXPECT_FALSE(bandwidthFor(0.9, periodic(10, 1, 0, 2e9), kCompute, 1.0, 2).has_value());
  // A tiny message is below the slowest link searched.
  EXPECT_EQ(bandwidthFor(0.5, periodic(10, 1, 0, 8), kCompute, 0, 2), kLowestBitPerS);
}

TEST(PlanModel, CodecTimeLengthensEachExchangeAndCanForbidACu) {
  // diloco's 2 s sync of 1e9 elements with a codec of 1 ns an element: 3 s every 10 steps.
  auto method = periodic(10, 1, 0, 2e9);
  method.message_elements = {1e9};
  method.codec_s_per_element = 1e-9;
  EXPECT_NEAR(estimateStep(method, kCompute, kLink, 2).step_s, 1.3, 1e-9);
  // The codec alone holds CU at 10 / 11: 0.95 is unreachable at any bandwidth, 0.9 is not.
  EXPECT_FALSE(bandwidthFor(0.95, method, kCompute, 0, 2).has_value());
  EXPECT_TRUE(bandwidthFor(0.9, method, kCompute, 0, 2).has_value());
  // The peak bandwidth is the transfer's, without the codec's time.
  EXPECT_NEAR(estimateStep(method, kCompute, kLink, 2).peak_bit_per_s, 1e9, 1);
  // Every step: a bucket's codec time delays the step's end like its transfer.
  auto buckets = everyStep({2e8, 2e8}, {0.5, 1.0});
  buckets.message_elements = {1e8, 1e8};
  buckets.codec_s_per_element = 1e-9;
  EXPECT_NEAR(estimateStep(buckets, kCompute, kLink, 2).step_s, 1.3, 1e-9);
}

}  // namespace
}  // namespace gcrun::planning
