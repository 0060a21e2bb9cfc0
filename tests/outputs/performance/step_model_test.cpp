// The step model against closed forms: one collective's cost, full overlap, none, queueing, skew
// between workers, compute scaling, and the replay of a trace's timeline.
#include <gtest/gtest.h>

#include "hyperparams/base/errors.h"
#include "outputs/performance/collective_cost.h"
#include "outputs/performance/step_model.h"
#include "outputs/performance/step_program.h"

namespace gcrun::performance {
namespace {

using Kind = StepItem::Kind;
using Part = StepItem::Part;

constexpr double kBandwidth = 1e9;  // bytes per second
constexpr double kLatency = 1e-4;   // seconds

network::NetworkProfile link() { return network::linkProfile(kBandwidth, kLatency); }

StepItem compute(double ms, Part part = Part::compute) { return {Kind::compute, part, 1000 * ms, 0}; }
StepItem issue(size_t c) { return {Kind::issue, Part::compute, 0, c}; }
StepItem call(size_t c) { return {Kind::call, Part::compute, 0, c}; }
StepItem wait(size_t c) { return {Kind::wait, Part::compute, 0, c}; }

// All-reduce of `bytes` at 2 workers on link(): 2 alpha + n beta.
double allReduceMs(double bytes, int workers = 2) {
  return 1000 * (2 * (workers - 1) * kLatency + 2.0 * (workers - 1) / workers * bytes / kBandwidth);
}

TEST(CollectiveCost, RingAllReduceAllGatherAndBroadcastOnALink) {
  const double n = 8e6;
  for (const int p : {2, 3, 16, 64}) {
    EXPECT_DOUBLE_EQ(collectiveSeconds(link(), CollectiveKind::all_reduce, n, p),
                     2 * (p - 1) * kLatency + 2.0 * (p - 1) / p * n / kBandwidth);
    EXPECT_DOUBLE_EQ(collectiveSeconds(link(), CollectiveKind::all_gather, n, p),
                     (p - 1) * (kLatency + n / kBandwidth));
    EXPECT_DOUBLE_EQ(collectiveSeconds(link(), CollectiveKind::broadcast, n, p),
                     std::ceil(std::log2(p)) * (kLatency + n / kBandwidth));
  }
  EXPECT_EQ(collectiveSeconds(link(), CollectiveKind::all_reduce, n, 1), 0);
}

TEST(CollectiveCost, AFitIsUsedAsMeasuredAndScaledToOtherWorldSizes) {
  network::NetworkProfile profile;
  profile.name = "fitted";
  profile.fits.push_back({CollectiveKind::all_reduce, 2, 3e-4, 2e-9, 0, {}});
  EXPECT_DOUBLE_EQ(collectiveSeconds(profile, CollectiveKind::all_reduce, 1e6, 2), 3e-4 + 2e-9 * 1e6);
  // At 2 workers the ring's factors are 2 (latency) and 1 (bytes): alpha = 1.5e-4, beta = 2e-9.
  EXPECT_DOUBLE_EQ(collectiveSeconds(profile, CollectiveKind::all_reduce, 1e6, 4), 6 * 1.5e-4 + 1.5 * 1e6 * 2e-9);
  EXPECT_THROW(collectiveSeconds(profile, CollectiveKind::all_gather, 1e6, 2), std::exception);
}

TEST(CollectiveCost, MeasuredMediansAreInterpolatedAtTheirWorldSize) {
  network::NetworkProfile profile;
  profile.name = "measured";
  network::Fit fit{CollectiveKind::all_reduce, 2, 1e-4, 1e-9, 0.5, {{4, 1e-4}, {1024, 2e-4}, {1 << 20, 3e-3}}};
  profile.fits.push_back(fit);
  EXPECT_DOUBLE_EQ(collectiveSeconds(profile, CollectiveKind::all_reduce, 1, 2), 1e-4);
  EXPECT_DOUBLE_EQ(collectiveSeconds(profile, CollectiveKind::all_reduce, 514, 2), 1.5e-4);
  const double slope = (3e-3 - 2e-4) / ((1 << 20) - 1024);
  EXPECT_DOUBLE_EQ(collectiveSeconds(profile, CollectiveKind::all_reduce, 2 << 20, 2), 3e-3 + slope * (1 << 20));
  // Another world size goes through the fitted line: alpha = 1e-4 / 2, beta = 1e-9.
  EXPECT_DOUBLE_EQ(collectiveSeconds(profile, CollectiveKind::all_reduce, 1e6, 4), 6 * 0.5e-4 + 1.5 * 1e6 * 1e-9);
}

// Fits at 4 workers without samples: their lines, latency_s + seconds_per_byte n.
network::Fit fitAt4(CollectiveKind collective, DataType dtype, double latency_s, double seconds_per_byte) {
  network::Fit fit{collective, 4, latency_s, seconds_per_byte, 0, {}};
  fit.dtype = dtype;
  return fit;
}

// Gloo's float16 sum is slower per byte than its float32 one: 5.5x at 4 workers here.
network::NetworkProfile float32AndFloat16() {
  network::NetworkProfile profile;
  profile.name = "by-dtype";
  profile.fits = {fitAt4(CollectiveKind::all_reduce, DataType::float32, 2e-4, 2.5e-9),
                  fitAt4(CollectiveKind::all_reduce, DataType::float16, 3e-4, 1.4e-8),
                  fitAt4(CollectiveKind::all_gather, DataType::float32, 1e-4, 1e-9)};
  return profile;
}

TEST(CollectiveCost, AReductionIsCostedByTheFitOfItsDtypeElseByFloat32) {
  const auto profile = float32AndFloat16();
  const double n = 32 << 20;
  EXPECT_DOUBLE_EQ(collectiveSeconds(profile, CollectiveKind::all_reduce, n, 4, DataType::float16), 3e-4 + 1.4e-8 * n);
  EXPECT_DOUBLE_EQ(collectiveSeconds(profile, CollectiveKind::all_reduce, n, 4, DataType::float32), 2e-4 + 2.5e-9 * n);
  EXPECT_DOUBLE_EQ(collectiveSeconds(profile, CollectiveKind::all_reduce, n, 4), 2e-4 + 2.5e-9 * n);
  // No bfloat16 fit: the float32 one. At 8 workers the float16 fit is scaled by the ring's factors
  // (latency 14/6, bytes 1.75/1.5), not replaced by the float32 fit measured there.
  EXPECT_DOUBLE_EQ(collectiveSeconds(profile, CollectiveKind::all_reduce, n, 4, DataType::bfloat16), 2e-4 + 2.5e-9 * n);
  auto at8 = profile;
  at8.fits.push_back({CollectiveKind::all_reduce, 8, 1, 1, 0, {}});
  EXPECT_DOUBLE_EQ(collectiveSeconds(at8, CollectiveKind::all_reduce, n, 8, DataType::float16),
                   14 * 3e-4 / 6 + 1.75 * n * 1.4e-8 / 1.5);
  // A float32-only profile costs a float16 all-reduce exactly as a float32 one.
  network::NetworkProfile float32_only;
  float32_only.fits = {profile.fits[0]};
  EXPECT_EQ(collectiveSeconds(float32_only, CollectiveKind::all_reduce, n, 4, DataType::float16),
            collectiveSeconds(float32_only, CollectiveKind::all_reduce, n, 4, DataType::float32));
  // Only float16 fits: a float32 all-reduce takes the link, or has no cost at all.
  network::NetworkProfile float16_only;
  float16_only.name = "half";
  float16_only.fits = {profile.fits[1]};
  EXPECT_THROW(collectiveSeconds(float16_only, CollectiveKind::all_reduce, n, 4), UserError);
  float16_only.bandwidth_bytes_per_s = kBandwidth;
  float16_only.latency_s = kLatency;
  EXPECT_DOUBLE_EQ(collectiveSeconds(float16_only, CollectiveKind::all_reduce, n, 4),
                   collectiveSeconds(link(), CollectiveKind::all_reduce, n, 4));
}

TEST(CollectiveCost, MovingBytesCostsTheSameInAnyDtype) {
  auto profile = float32AndFloat16();
  const double n = 1e6;
  for (const auto dtype : {DataType::uint8, DataType::float16, DataType::int64}) {
    EXPECT_DOUBLE_EQ(collectiveSeconds(profile, CollectiveKind::all_gather, n, 4, dtype), 1e-4 + 1e-9 * n);
  }
  // A hand-edited profile whose only all-gather fit is in float16 costs a uint8 one by it.
  profile.fits[2].dtype = DataType::float16;
  EXPECT_DOUBLE_EQ(collectiveSeconds(profile, CollectiveKind::all_gather, n, 4, DataType::uint8), 1e-4 + 1e-9 * n);
  EXPECT_THROW(collectiveSeconds(profile, CollectiveKind::broadcast, n, 4, DataType::uint8), UserError);
}

StepProgram program(std::vector<StepItem> items, std::vector<CollectiveOp> collectives) {
  StepProgram p;
  p.step = 1;
  p.items = std::move(items);
  p.collectives = std::move(collectives);
  return p;
}

TEST(StepModel, ABlockingAllReduceAfterBackwardIsFullyExposed) {
  const double n = 4e7;
  const auto p = program({compute(10), compute(100), call(0), compute(5)}, {{CollectiveKind::all_reduce, n}});
  const auto predicted = predictStep({&p}, 2, link());
  EXPECT_NEAR(predicted.total_ms, 115 + allReduceMs(n), 1e-9);
  EXPECT_NEAR(predicted.exposed_comm_ms, allReduceMs(n), 1e-9);
  EXPECT_NEAR(predicted.compute_ms, 115, 1e-9);
}

TEST(StepModel, AnAllReduceHiddenBehindBackwardCostsNothing) {
  const double n = 2e7;  // 20 ms at 2 workers, issued 50 ms before backward ends
  const auto p = program({compute(10), compute(50), issue(0), compute(50), wait(0)}, {{CollectiveKind::all_reduce, n}});
  const auto predicted = predictStep({&p}, 2, link());
  EXPECT_NEAR(predicted.total_ms, 110, 1e-9);
  EXPECT_NEAR(predicted.exposed_comm_ms, 0, 1e-9);
}

TEST(StepModel, PartialOverlapExposesWhatOutlastsBackward) {
  const double n = 1.5e8;  // 150 ms + latency, issued at backward's start (100 ms)
  const auto p = program({compute(10), issue(0), compute(100), wait(0)}, {{CollectiveKind::all_reduce, n}});
  const auto predicted = predictStep({&p}, 2, link());
  EXPECT_NEAR(predicted.total_ms, 10 + allReduceMs(n), 1e-9);
  EXPECT_NEAR(predicted.exposed_comm_ms, allReduceMs(n) - 100, 1e-9);
}

TEST(StepModel, BucketsQueueOneAfterAnother) {
  const double n = 6e7;  // 60 ms each: the second starts when the first is done
  const auto p = program({issue(0), compute(10), issue(1), compute(90), wait(0), wait(1)},
                         {{CollectiveKind::all_reduce, n}, {CollectiveKind::all_reduce, n}});
  const auto predicted = predictStep({&p}, 2, link());
  EXPECT_NEAR(predicted.total_ms, 2 * allReduceMs(n), 1e-9);
}

TEST(StepModel, ACollectiveStartsWhenTheSlowestWorkerIssuesIt) {
  const double n = 1e7;
  const auto fast = program({compute(50), call(0)}, {{CollectiveKind::all_reduce, n}});
  const auto slow = program({compute(80), call(0)}, {{CollectiveKind::all_reduce, n}});
  for (const int workers : {2, 8}) {
    const auto predicted = predictStep({&fast, &slow}, workers, link());
    EXPECT_NEAR(predicted.total_ms, 80 + allReduceMs(n, workers), 1e-9) << workers;
  }
}

TEST(StepModel, AllGatherGrowsWithTheWorkersAndComputeScales) {
  const double n = 1e6;
  const auto p = program({compute(20), call(0), compute(4, Part::codec)}, {{CollectiveKind::all_gather, n}});
  const auto at16 = predictStep({&p}, 16, link(), {0.5, 0.5});
  EXPECT_NEAR(at16.total_ms, 10 + 15 * 1000 * (kLatency + n / kBandwidth) + 2, 1e-9);
  EXPECT_NEAR(at16.codec_ms, 2, 1e-9);
  EXPECT_NEAR(at16.compute_ms, 10, 1e-9);
  // The codec scaled apart from the compute (a shared compute profile keeps each run's codec).
  const auto own_codec = predictStep({&p}, 16, link(), {0.5, 1});
  EXPECT_NEAR(own_codec.codec_ms, 4, 1e-9);
  EXPECT_NEAR(own_codec.compute_ms, 10, 1e-9);
}

TEST(StepModel, WorkersMustShareTheirCollectives) {
  const auto a = program({call(0)}, {{CollectiveKind::all_reduce, 8}});
  const auto b = program({call(0)}, {{CollectiveKind::all_gather, 8}});
  EXPECT_THROW(predictStep({&a, &b}, 2, link()), std::invalid_argument);
  const auto half = program({call(0)}, {{CollectiveKind::all_reduce, 8, false, DataType::float16}});
  EXPECT_THROW(predictStep({&a, &half}, 2, link()), std::invalid_argument);
  EXPECT_NO_THROW(predictStep({&half, &half}, 2, link()));
}

// A timeline as the trace reader returns it: forward 0-10 ms, backward 10-110 ms with a bucket
// all-reduce issued at 60 ms, the reduce 112-140 ms waiting for it until 125 ms and then calling
// an all-gather from 130 to 135 ms, the optimizer 140-150 ms.
trace::WorkerTimeline timeline() {
  trace::WorkerTimeline worker;
  const auto span = [&](const char* name, double from_ms, double to_ms) {
    worker.spans.push_back({name, 3, 1000 * from_ms, 1000 * (to_ms - from_ms)});
  };
  span("batch", 0, 150);
  span("forward", 0, 10);
  span("backward", 10, 110);
  span("reduce", 112, 140);
  span("optimizer", 140, 150);
  worker.collectives.push_back({CollectiveKind::all_reduce, 4000, 2, 3, true, 60e3, 112e3, 125e3});
  worker.collectives.push_back({CollectiveKind::all_gather, 100, 2, 3, false, 130e3, 130e3, 135e3});
  worker.collectives.push_back({CollectiveKind::all_reduce, 8, 2, 3, false, 151e3, 151e3, 152e3});  // after the batch
  return worker;
}

TEST(StepProgram, ATimelineBecomesComputeIssuesCallsAndWaits) {
  const auto programs = stepPrograms(timeline(), true, false);
  ASSERT_EQ(programs.size(), 1u);
  const auto& p = programs.front();
  EXPECT_EQ(p.step, 3);
  ASSERT_EQ(p.collectives.size(), 2u);
  EXPECT_EQ(p.collectives[0].kind, CollectiveKind::all_reduce);
  EXPECT_EQ(p.collectives[1].bytes, 100);
  const std::vector<std::tuple<Kind, Part, double>> expected = {
      {Kind::compute, Part::compute, 60e3},  // forward and backward up to the issue
      {Kind::issue, Part::compute, 0},
      {Kind::compute, Part::compute, 52e3},  // the rest of backward and the gap
                                             // to the reduce
      {Kind::wait, Part::compute, 0},
      {Kind::compute, Part::codec, 5e3},
      {Kind::call, Part::compute, 0},
      {Kind::compute, Part::codec, 5e3},
      {Kind::compute, Part::compute, 10e3},
  };
  ASSERT_EQ(p.items.size(), expected.size());
  for (size_t k = 0; k < expected.size(); ++k) {
    EXPECT_EQ(p.items[k].kind, std::get<0>(expected[k])) << k;
    EXPECT_EQ(p.items[k].part, std::get<1>(expected[k])) << k;
    EXPECT_NEAR(p.items[k].us, std::get<2>(expected[k]), 1e-6) << k;
  }
  // Replayed on a network as fast as the measured one gives the measured step back, less the
  // network's share, plus the model's.
  const auto predicted = predictStep({&p}, 2, link());
  EXPECT_NEAR(predicted.total_ms, 60 + 52 + 5 + 1000 * (kLatency + 100 / kBandwidth) + 5 + 10, 1e-9);
}

// streaming-diloco's exchange in the background: step 6 (0-100 ms) starts it in its sync span
// (90-100 ms), its thread issues it at 102 ms, and step 7 (100-260 ms) waits for it in its sync
// span (200-260 ms) until 250 ms. Step 6 replays it as a call at its end, the time model's to
// hide; step 7's wait for it is neither compute nor a collective of its own.
TEST(StepProgram, ABackgroundExchangeIsACallOfItsStepAndItsWaitIsNoCompute) {
  trace::WorkerTimeline worker;
  const auto step = [&](int64_t at, double from_ms, double compute_to_ms, double to_ms) {
    const auto span = [&](const char* name, double a, double b) {
      worker.spans.push_back({name, at, 1000 * a, 1000 * (b - a)});
    };
    span("batch", from_ms, to_ms);
    span("forward", from_ms, from_ms + 10);
    span("backward", from_ms + 10, compute_to_ms);
    span("reduce", compute_to_ms, compute_to_ms);
    span("sync", compute_to_ms, to_ms);
  };
  step(6, 0, 90, 100);
  step(7, 100, 200, 260);
  trace::Collective exchange{CollectiveKind::all_reduce, 4000, 2, 6, false, 102e3, 102e3, 250e3};
  exchange.background = true;
  worker.collectives.push_back(exchange);
  const auto programs = stepPrograms(worker, true, false);
  ASSERT_EQ(programs.size(), 2u);
  ASSERT_EQ(programs[0].collectives.size(), 1u);
  EXPECT_TRUE(programs[0].collectives[0].background);
  ASSERT_FALSE(programs[0].items.empty());
  EXPECT_EQ(programs[0].items.back().kind, Kind::call);
  EXPECT_NEAR(programs[0].compute_us(), 100e3, 1e-6);
  EXPECT_TRUE(programs[1].collectives.empty());
  EXPECT_NEAR(programs[1].compute_us(), 160e3 - 50e3, 1e-6);  // the wait, 200-250 ms, left out
}

TEST(StepProgram, ATwoWorkerSwapOfSummableMessagesIsAnAllReduceElsewhere) {
  const auto swapped = stepPrograms(timeline(), true, true).front();
  ASSERT_TRUE(swapped.collectives[1].stands_for_sum);
  EXPECT_FALSE(stepPrograms(timeline(), true, false).front().collectives[1].stands_for_sum);
  EXPECT_EQ(swapped.collectives[1].kindAt(2), CollectiveKind::all_gather);
  EXPECT_EQ(swapped.collectives[1].kindAt(16), CollectiveKind::all_reduce);
  const auto gathered = stepPrograms(timeline(), true, false).front();
  // At 16 workers the swap costs an all-reduce of its 100 bytes, not an all-gather.
  const double difference =
      predictStep({&gathered}, 16, link()).total_ms - predictStep({&swapped}, 16, link()).total_ms;
  EXPECT_NEAR(difference,
              1000 * (15 * (kLatency + 100 / kBandwidth) - (30 * kLatency + 2.0 * 15 / 16 * 100 / kBandwidth)), 1e-9);
}

// fp16 between 2 workers all-gathers its float16 payloads; at 4 it sums them in a float16
// all-reduce, which costs what the float16 fit says.
TEST(StepProgram, ATwoWorkerFloat16SwapIsAFloat16AllReduceElsewhere) {
  auto worker = timeline();
  worker.collectives[1].dtype = DataType::float16;
  const auto swapped = stepPrograms(worker, true, true).front();
  ASSERT_EQ(swapped.collectives[1].dtype, DataType::float16);
  EXPECT_EQ(swapped.collectives[0].dtype, DataType::float32);
  ASSERT_EQ(swapped.collectives[1].kindAt(4), CollectiveKind::all_reduce);
  // The swap is a blocking call after the bucket's wait, so its whole cost shows in the step; the
  // float32 bucket is done long before its wait on either profile.
  const auto profile = float32AndFloat16();
  auto float32_only = profile;
  float32_only.fits.erase(float32_only.fits.begin() + 1);
  const double difference =
      predictStep({&swapped}, 4, profile).total_ms - predictStep({&swapped}, 4, float32_only).total_ms;
  EXPECT_NEAR(difference, 1000 * ((3e-4 + 1.4e-8 * 100) - (2e-4 + 2.5e-9 * 100)), 1e-9);
}

TEST(StepProgram, ASimulatedWorkerLeavesOutItsWaitsAndSharesTheOptimizer) {
  const OptimizerTimes worker0_optimizer = {{3, 7000}};
  // Its own "optimizer" span (10 ms) is mostly waiting for worker 0's update: worker 0's 7 ms count.
  const auto programs = stepPrograms(timeline(), false, false, &worker0_optimizer);
  ASSERT_EQ(programs.size(), 1u);
  // 110 ms of forward and backward (the 2 ms before the reduce left out), 10 ms of codec, 7 ms shared.
  EXPECT_NEAR(programs.front().compute_us(), 110e3 + 10e3 + 7e3, 1e-6);
}

}  // namespace
}  // namespace gcrun::performance
