// predictRuns's speedups and break-even bandwidths against closed forms, the time to a target,
// and the files gcrun predict writes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "hyperparams/base/errors.h"
#include "outputs/performance/prediction.h"
#include "outputs/performance/prediction_output.h"
#include "outputs/performance/report_projection.h"
#include "tests/support/step_timelines.h"
#include "tests/support/temp_dir.h"

namespace gcrun::performance {
namespace {

using testing::blockingRun;

constexpr double kLatency = 2e-5;

outputs::RunData runOf(const std::string& dir, const std::string& reducer) {
  outputs::RunData run;
  run.dir = dir;
  run.name = dir;
  run.world_size = 2;
  run.time_per_batch_ms = 123;
  run.settings = {{"reducer.name", reducer}, {"task.name", "fashion-mnist"}, {"training.batch_size", "64"}};
  run.baseline = reducer == "exact" ? Baseline::full_precision : Baseline::none;
  run.metric = "test.accuracy";
  run.epochs = {{100, 1, 0.5, 0, 10}, {200, 2, 0.8, 0, 21}, {300, 3, 0.9, 0, 33}};
  return run;
}

TEST(Prediction, SpeedupsAndBreakEvenFollowTheClosedForm) {
  const double exact_bytes = 1e8, method_bytes = 1e6, codec_ms = 20;
  const std::vector<outputs::RunData> runs = {runOf("exact", "exact"), runOf("psgd", "powersgd")};
  const std::vector<RunTimeline> timelines = {blockingRun(100, 0, exact_bytes),
                                              blockingRun(100, codec_ms, method_bytes)};
  PredictOptions options;
  const double bandwidth = 1.25e9;  // 10 Gbit/s
  options.networks = {network::linkProfile(bandwidth, kLatency)};
  options.workers = {2};
  options.target = outputs::Target{"test.accuracy", 0.75, false};
  const auto rows = predictRuns(runs, timelines, options);
  ASSERT_EQ(rows.size(), 2u);
  const double exact_ms = 100 + 1000 * (2 * kLatency + exact_bytes / bandwidth);
  const double method_ms = 120 + 1000 * (2 * kLatency + method_bytes / bandwidth);
  EXPECT_NEAR(rows[0].predicted.total_ms, exact_ms, 1e-9);
  EXPECT_NEAR(rows[1].predicted.total_ms, method_ms, 1e-9);
  EXPECT_NEAR(*rows[1].speedup_vs_exact, exact_ms / method_ms, 1e-12);
  EXPECT_NEAR(*rows[0].speedup_vs_exact, 1, 1e-12);
  EXPECT_FALSE(rows[0].break_even_vs_exact.has_value());
  EXPECT_FALSE(rows[1].speedup_vs_fp16.has_value());
  // Equal when the bytes saved take as long as the codec: (exact - method) / B = 20 ms.
  EXPECT_NEAR(*rows[1].break_even_vs_exact, (exact_bytes - method_bytes) / (codec_ms / 1000), 1e-3 * 4.95e9);
  EXPECT_EQ(breakEvenText(rows[1].break_even_vs_exact), "below 39.6 Gbit/s");
  EXPECT_EQ(*rows[1].measured_ms_per_batch, 123);
  EXPECT_EQ(*rows[1].steps_to_target, 200);
  EXPECT_NEAR(*rows[1].predicted_time_to_target_s, 200 * method_ms / 1000, 1e-9);
  EXPECT_EQ(*rows[1].measured_time_to_target_s, 21);
}

TEST(Prediction, AMethodSlowerAtEveryBandwidthNeverPays) {
  const std::vector<outputs::RunData> runs = {runOf("exact", "exact"), runOf("slow", "topk")};
  const std::vector<RunTimeline> timelines = {blockingRun(100, 0, 1e6), blockingRun(100, 50, 2e6)};
  PredictOptions options;
  options.networks = {network::linkProfile(1.25e8, kLatency)};
  const auto rows = predictRuns(runs, timelines, options);
  EXPECT_EQ(breakEvenText(rows[1].break_even_vs_exact), "never");
}

TEST(Prediction, AStepOfNoTimeHasNoSpeedupRatherThanNaN) {
  const std::vector<outputs::RunData> runs = {runOf("exact", "exact"), runOf("psgd", "powersgd")};
  const std::vector<RunTimeline> timelines = {blockingRun(0, 0, 0), blockingRun(0, 0, 0)};
  PredictOptions options;
  options.networks = {network::linkProfile(1.25e9, 0)};
  const auto rows = predictRuns(runs, timelines, options);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].predicted.total_ms, 0);
  EXPECT_FALSE(rows[1].speedup_vs_exact.has_value());
}

TEST(Prediction, MissingTimelineAndBadProjectionsAreUserErrors) {
  testing::TempDir dir;
  EXPECT_THROW(loadRunTimeline(runOf(dir.path().string(), "exact")), UserError);
  for (const char* bad : {"workers=0,bandwidth=1gbit", "workers=16", "workers=16,bandwidth=10gbps",
                          "workers=16,bandwidth=1gbit,network=x.yaml", "cores=2,bandwidth=1gbit"}) {
    EXPECT_THROW(parseProjection(bad, "--predict"), UserError) << bad;
  }
  const auto spec = parseProjection("workers=16,bandwidth=10gbit,latency=5us", "--predict");
  EXPECT_EQ(spec.workers, 16);
  EXPECT_DOUBLE_EQ(spec.network.bandwidth_bytes_per_s, 1.25e9);
  EXPECT_DOUBLE_EQ(spec.network.latency_s, 5e-6);
  EXPECT_THROW(outputs::parseTarget("accuracy>0.9", "--target"), UserError);
  EXPECT_TRUE(outputs::parseTarget("validation.perplexity=150", "--target").lower_is_better);
}

TEST(Prediction, FilesAreWrittenWithoutFollowingAPlantedSymlink) {
  testing::TempDir dir;
  const auto victim = dir.file("victim.txt");
  std::ofstream(victim) << "keep";
  std::filesystem::create_directories(dir.path() / "out");
  std::filesystem::create_symlink(victim, dir.path() / "out" / "predict.csv");
  const std::vector<outputs::RunData> runs = {runOf("exact", "exact"), runOf("=cmd|calc!A0", "powersgd")};
  const std::vector<RunTimeline> timelines = {blockingRun(100, 0, 1e8), blockingRun(100, 20, 1e6)};
  PredictOptions options;
  options.networks = {network::linkProfile(1.25e8, kLatency), network::linkProfile(1.25e10, kLatency)};
  options.workers = {2, 16};
  const auto rows = predictRuns(runs, timelines, options);
  EXPECT_EQ(rows.size(), 8u);
  const auto written = writePrediction(runs, timelines, rows, options, dir.file("out"));
  std::ifstream kept(victim);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), "keep");
  EXPECT_FALSE(std::filesystem::is_symlink(dir.path() / "out" / "predict.csv"));
  std::ifstream csv(dir.file("out/predict.csv"));
  std::string header, line;
  std::getline(csv, header);
  EXPECT_EQ(header.rfind("run,reducer,workers,network,measured_ms_per_batch,predicted_ms_per_batch,compute_ms,"
                         "exposed_comm_ms,codec_ms,",
                         0),
            0u);
  size_t lines = 0;
  bool neutralized = false;
  while (std::getline(csv, line)) {
    ++lines;
    neutralized |= line.rfind("\"'=cmd", 0) == 0 || line.rfind("'=cmd", 0) == 0;
  }
  EXPECT_EQ(lines, 8u);
  EXPECT_TRUE(neutralized);
  EXPECT_TRUE(std::filesystem::is_regular_file(dir.path() / "out" / "predict.md"));
  EXPECT_GE(predictionPlots(runs, timelines, rows, options).size(), 3u);  // two bandwidth plots, one time plot
}

}  // namespace
}  // namespace gcrun::performance
