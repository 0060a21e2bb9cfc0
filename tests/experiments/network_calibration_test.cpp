// The calibration's sizes, timings over a real two-rank group, fits, table and merged profile.
#include "experiments/bench/network_calibration.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <torch/torch.h>

#include "experiments/bench/network_bench.h"
#include "hyperparams/base/units.h"
#include "tests/support/multi_rank.h"
#include "tests/support/user_error.h"

namespace gcrun::experiments {
namespace {

using testing::expectMessageHas;
using testing::userErrorOf;

TEST(NetworkCalibration, MessageSizes) {
  EXPECT_EQ(parseMessageBytes("4", "--min-bytes"), 4);
  EXPECT_EQ(parseMessageBytes("64KiB", "--max-bytes"), 65536);
  EXPECT_EQ(parseMessageBytes("256MiB", "--max-bytes"), 268435456);
  EXPECT_EQ(parseMessageBytes("1GB", "--max-bytes"), 1000000000);
  for (const char* bad : {"3", "0", "-4", "64kib", "1.5MiB", "8GiB", "lots"}) {
    expectMessageHas(userErrorOf([&] { parseMessageBytes(bad, "--max-bytes"); }),
                     {"--max-bytes", std::string("'") + bad + "'", "multiple of 4", "64KiB"});
  }
  EXPECT_EQ(units::byteCountText(4), "4");
  EXPECT_EQ(units::byteCountText(65536), "64KiB");
  EXPECT_EQ(units::byteCountText(268435456), "256MiB");
  EXPECT_EQ(messageSizes(4, 256), (std::vector<int64_t>{4, 16, 64, 256}));
  EXPECT_EQ(messageSizes(4, 100), (std::vector<int64_t>{4, 16, 64, 100}));
  EXPECT_EQ(messageSizes(4, int64_t{256} << 20).size(), 14u);
}

// Rank 0 of two over a link that takes 10 ns per byte (a 256 KiB message 2.6 ms, 1 MiB 10.5 ms):
// the collectives sleep that long and leave the tensors as they are.
class SlowLink : public comm::Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string backend() const override { return "gloo"; }
  void allreduceSum(at::Tensor& tensor) override { send(tensor); }
  std::unique_ptr<comm::PendingCollective> allreduceSumAsync(at::Tensor&) override { return nullptr; }
  std::vector<at::Tensor> allgather(const at::Tensor& tensor) override {
    send(tensor);
    return {tensor, tensor};
  }
  void broadcast(at::Tensor& tensor, int /*root*/) override { send(tensor); }
  void barrier() override {}

 private:
  static void send(const at::Tensor& tensor) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(10 * tensor.numel() * tensor.element_size()));
  }
};

CalibrationPlan slowLinkPlan() {
  CalibrationPlan plan;
  plan.collectives = {CollectiveKind::all_reduce, CollectiveKind::broadcast};
  plan.dtypes = {DataType::float32};
  plan.min_bytes = 4096;
  plan.max_bytes = int64_t{16} << 20;  // 16 MiB: 168 ms a run
  plan.warmup = 0;
  plan.repeats = 1;
  plan.slow_message_s = 0.005;  // 5 ms: 1 MiB is the first size slower
  return plan;
}

TEST(NetworkCalibration, ASeriesStopsGrowingAfterItsFirstSizeSlowerThanTheBudget) {
  SlowLink link;
  std::vector<std::string> printed;
  const auto timings =
      timeCollectives(link, slowLinkPlan(), [&](const SizeTiming& t) { printed.push_back(sizeTimingLine(t)); });
  const std::vector<int64_t> sizes = {4096, 16384, 65536, 262144, 1048576};
  ASSERT_EQ(timings.size(), 2 * sizes.size());
  for (size_t i = 0; i < timings.size(); ++i) EXPECT_EQ(timings[i].bytes, sizes[i % sizes.size()]) << i;
  EXPECT_EQ(timings[4].collective, CollectiveKind::all_reduce);
  EXPECT_EQ(timings[5].collective, CollectiveKind::broadcast);
  ASSERT_EQ(printed.size(), timings.size());  // each size as it was timed
  EXPECT_EQ(printed[4].rfind("all-reduce  float32       1MiB", 0), 0u) << printed[4];

  auto full = slowLinkPlan();
  full.full_sweep = true;
  full.collectives = {CollectiveKind::broadcast};
  EXPECT_EQ(timeCollectives(link, full).size(), messageSizes(full.min_bytes, full.max_bytes).size());
}

TEST(NetworkCalibration, SaysUpFrontHowLongItMayTake) {
  CalibrationPlan plan;  // the defaults: 5 series of 6 runs, a series up to its first size over 3 s
  EXPECT_EQ(seriesCount(plan), 5);
  ASSERT_TRUE(calibrationBoundS(plan));
  EXPECT_DOUBLE_EQ(*calibrationBoundS(plan), 5 * 6 * 3 * (4 + 4.0 / 3));
  EXPECT_EQ(calibrationPlanText(plan),
            "timing 5 series (collective and dtype) at up to 14 sizes from 4 to 256MiB, 6 runs each; a series ends "
            "after its first size slower than 3 s a run, so this takes at most about 8m00s (--full-sweep times "
            "every size)");
  plan.full_sweep = true;
  EXPECT_FALSE(calibrationBoundS(plan));
  EXPECT_NE(calibrationPlanText(plan).find("every size is timed (--full-sweep)"), std::string::npos);
}

TEST(NetworkCalibration, TimesEveryCollectiveAndSizeAlikeOnEveryRank) {
  CalibrationPlan plan;
  plan.dtypes = {DataType::float32};
  plan.max_bytes = 1024;
  plan.repeats = 3;
  std::vector<std::vector<SizeTiming>> seen(2);
  testing::runRanks(2, [&](comm::Communicator& comm) { seen[comm.rank()] = timeCollectives(comm, plan); });
  ASSERT_EQ(seen[0].size(), 3u * 5u);
  for (size_t i = 0; i < seen[0].size(); ++i) {
    const auto& timing = seen[0][i];
    EXPECT_EQ(timing.collective, plan.collectives[i / 5]);
    EXPECT_EQ(timing.bytes, messageSizes(4, 1024)[i % 5]);
    EXPECT_GT(timing.min_s, 0);
    EXPECT_LE(timing.min_s, timing.median_s);
    EXPECT_LE(timing.median_s, timing.max_s);
    // The slowest rank's times, so both ranks agree.
    EXPECT_EQ(timing.median_s, seen[1][i].median_s);
    EXPECT_EQ(timing.max_s, seen[1][i].max_s);
  }
}

TEST(NetworkCalibration, ReductionTypes) {
  EXPECT_EQ(parseReductionType("float32", "--dtypes"), DataType::float32);
  EXPECT_EQ(parseReductionType("float16", "--dtypes"), DataType::float16);
  EXPECT_EQ(parseReductionType("bfloat16", "--dtypes"), DataType::bfloat16);
  for (const char* bad : {"float8", "int64", "half", "Float32"}) {
    expectMessageHas(userErrorOf([&] { parseReductionType(bad, "--dtypes"); }),
                     {"--dtypes", std::string("'") + bad + "'", "expected float32, float16 or bfloat16"});
  }
}

// The all-reduce in each dtype, the broadcast in float32 alone; a float16 tensor of n bytes holds
// n / 2 elements, so the same sizes come back.
TEST(NetworkCalibration, TimesTheAllReduceInEachDtypeOverRealRanks) {
  CalibrationPlan plan;
  plan.collectives = {CollectiveKind::all_reduce, CollectiveKind::broadcast};
  plan.dtypes = {DataType::float32, DataType::float16};
  plan.max_bytes = 64;
  plan.repeats = 2;
  std::vector<std::vector<SizeTiming>> seen(2);
  testing::runRanks(2, [&](comm::Communicator& comm) { seen[comm.rank()] = timeCollectives(comm, plan); });
  const auto sizes = messageSizes(4, 64);
  ASSERT_EQ(seen[0].size(), 3 * sizes.size());
  const std::pair<CollectiveKind, DataType> expected[] = {{CollectiveKind::all_reduce, DataType::float32},
                                                          {CollectiveKind::all_reduce, DataType::float16},
                                                          {CollectiveKind::broadcast, DataType::float32}};
  for (size_t i = 0; i < seen[0].size(); ++i) {
    EXPECT_EQ(seen[0][i].collective, expected[i / sizes.size()].first) << i;
    EXPECT_EQ(seen[0][i].dtype, expected[i / sizes.size()].second) << i;
    EXPECT_EQ(seen[0][i].bytes, sizes[i % sizes.size()]) << i;
    EXPECT_EQ(seen[0][i].median_s, seen[1][i].median_s) << i;
  }
  const auto fits = fitTimings(seen[0], 2);
  ASSERT_EQ(fits.size(), 3u);
  for (size_t k = 0; k < fits.size(); ++k) {
    EXPECT_EQ(fits[k].collective, expected[k].first);
    EXPECT_EQ(fits[k].dtype, expected[k].second);
    EXPECT_EQ(fits[k].samples.size(), sizes.size());
  }
}

TEST(NetworkCalibration, FitsEachCollectiveAndTablesTheResiduals) {
  std::vector<SizeTiming> timings;
  for (const auto collective : {CollectiveKind::broadcast, CollectiveKind::all_reduce}) {
    for (const int64_t bytes : {4, 1024, 65536}) {
      const double seconds = 1e-4 + 1e-8 * static_cast<double>(bytes);
      timings.push_back({collective, bytes, seconds, seconds * 0.9, seconds * 1.2});
    }
  }
  const auto fits = fitTimings(timings, 4);
  ASSERT_EQ(fits.size(), 2u);
  EXPECT_EQ(fits[0].collective, CollectiveKind::broadcast);
  EXPECT_EQ(fits[1].world_size, 4);
  EXPECT_NEAR(fits[1].latency_s, 1e-4, 1e-12);
  const auto table = formatCalibration(timings, fits);
  for (const char* part : {"collective", "median ms", "fitted ms", "residual %", "64KiB", "0.7554",
                           "all-reduce at 4 workers: latency 100 us, 10 ns per byte (800 mbit/s)"}) {
    EXPECT_NE(table.find(part), std::string::npos) << part << " not in\n" << table;
  }
}

// float16's medians are 5 times float32's per byte: a fit, a row and a line of their own.
TEST(NetworkCalibration, FitsEachDtypeApartAndNamesItInTheTable) {
  std::vector<SizeTiming> timings;
  for (const auto& [dtype, per_byte] : {std::pair{DataType::float32, 1e-8}, std::pair{DataType::float16, 5e-8}}) {
    for (const int64_t bytes : {4, 1024, 65536}) {
      const double seconds = 1e-4 + per_byte * static_cast<double>(bytes);
      timings.push_back({CollectiveKind::all_reduce, bytes, seconds, seconds, seconds, dtype});
    }
  }
  const auto fits = fitTimings(timings, 4);
  ASSERT_EQ(fits.size(), 2u);
  EXPECT_EQ(fits[0].dtype, DataType::float32);
  EXPECT_EQ(fits[1].dtype, DataType::float16);
  EXPECT_NEAR(fits[0].seconds_per_byte, 1e-8, 1e-15);
  EXPECT_NEAR(fits[1].seconds_per_byte, 5e-8, 1e-15);
  const auto table = formatCalibration(timings, fits);
  for (const char* part : {"dtype", "\nall-reduce  float16 ", "float32 all-reduce at 4 workers: latency 100 us, 10 ns",
                           "float16 all-reduce at 4 workers: latency 100 us, 50 ns"}) {
    EXPECT_NE(table.find(part), std::string::npos) << part << " not in\n" << table;
  }
}

TEST(NetworkCalibration, MergeKeepsWhatThisRunDoesNotReplace) {
  network::NetworkProfile previous;
  previous.name = "old";
  previous.bandwidth_bytes_per_s = 1.25e8;
  previous.latency_s = 1e-4;
  previous.fits = {{CollectiveKind::all_reduce, 4, 1, 1, 0}, {CollectiveKind::all_reduce, 2, 9, 9, 0}};
  NetworkBenchRequest request;
  request.output = "/tmp/lab-link.yaml";
  const std::vector<network::Fit> fits = {{CollectiveKind::all_reduce, 2, 2e-5, 1e-9, 0.1}};
  const auto merged = calibratedProfile(fits, request, &previous);
  EXPECT_EQ(merged.name, "old");
  EXPECT_EQ(merged.backend, "gloo");
  EXPECT_EQ(merged.latency_s, 1e-4);
  ASSERT_EQ(merged.fits.size(), 2u);
  EXPECT_EQ(merged.fits[0].world_size, 2);
  EXPECT_EQ(merged.fits[0].latency_s, 2e-5);
  EXPECT_EQ(merged.fits[1].world_size, 4);
  // Another dtype at the same world size is another fit: kept, after float32.
  previous.fits.push_back({CollectiveKind::all_reduce, 2, 3e-5, 5e-9, 0, {}});
  previous.fits.back().dtype = DataType::float16;
  const auto with_float16 = calibratedProfile(fits, request, &previous);
  ASSERT_EQ(with_float16.fits.size(), 3u);
  EXPECT_EQ(with_float16.fits[0].latency_s, 2e-5);
  EXPECT_EQ(with_float16.fits[1].dtype, DataType::float16);
  EXPECT_EQ(with_float16.fits[1].latency_s, 3e-5);
  EXPECT_EQ(with_float16.fits[2].world_size, 4);
  const auto fresh = calibratedProfile(fits, request, nullptr);
  EXPECT_EQ(fresh.name, "lab-link");
  request.name = "named";
  EXPECT_EQ(calibratedProfile(fits, request, &previous).name, "named");
  EXPECT_EQ(fresh.latency_s, -1);
  EXPECT_EQ(fresh.fits.size(), 1u);
}

}  // namespace
}  // namespace gcrun::experiments
