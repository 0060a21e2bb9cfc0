// The time model of strategies that sync models every H steps against closed forms: an amortised
// sync, the what-if over H, CU and the paper formula, a streaming sync hidden, partly exposed and
// queued; runs of one model replaying one compute; "no difference"; the recommendation.
#include <gtest/gtest.h>

#include "hyperparams/base/errors.h"
#include "outputs/performance/compute_basis.h"
#include "outputs/performance/prediction.h"
#include "outputs/performance/prediction_table.h"
#include "outputs/performance/recommendation.h"
#include "outputs/performance/run_schedule.h"
#include "outputs/performance/sync_cost.h"
#include "tests/support/step_timelines.h"

namespace gcrun::performance {
namespace {

using Kind = StepItem::Kind;
using Part = StepItem::Part;

constexpr double kLatency = 2e-5;
constexpr double kBandwidth = 1.25e8;  // 1 Gbit/s

StepProgram localStep(int64_t step, double compute_ms) {
  StepProgram p;
  p.step = step;
  p.items = {{Kind::compute, Part::compute, 1000 * compute_ms, 0}};
  return p;
}

using testing::blockingStep;

// Two workers over steps 1-8 of a diloco run with H = 4: steps 4 and 8 sync.
RunTimeline dilocoRun(double compute_ms, double sync_ms, double bytes) {
  RunTimeline timeline;
  timeline.schedule = {"diloco", true, 4, 1, 0};
  for (int w = 0; w < 2; ++w) {
    std::vector<StepProgram> steps;
    for (int64_t step = 1; step <= 8; ++step) {
      steps.push_back(step % 4 == 0 ? blockingStep(step, compute_ms, sync_ms, bytes) : localStep(step, compute_ms));
    }
    timeline.workers.push_back(steps);
  }
  return timeline;
}

// Two workers, every step a blocking all-reduce of `bytes` after `compute_ms` (an every-step run).
RunTimeline everyStepRun(const std::vector<double>& compute_ms, double bytes) {
  RunTimeline timeline;
  for (int w = 0; w < 2; ++w) {
    std::vector<StepProgram> steps;
    for (size_t k = 0; k < compute_ms.size(); ++k)
      steps.push_back(blockingStep(int64_t(k) + 1, compute_ms[k], 0, bytes));
    timeline.workers.push_back(steps);
  }
  return timeline;
}

outputs::RunData runOf(const std::string& dir, const std::string& reducer, const std::string& strategy = "") {
  outputs::RunData run;
  run.dir = dir;
  run.name = dir;
  run.world_size = 2;
  run.time_per_batch_ms = 50;       // the median step
  run.mean_time_per_batch_ms = 60;  // the mean: a periodic run's local steps and syncs differ
  run.settings = {{"reducer.name", reducer}, {"task.name", "gpt"}, {"training.batch_size", "8"}};
  if (!strategy.empty()) {
    run.settings["sync.strategy"] = strategy;
    run.settings["sync.every"] = "4";
  }
  run.baseline = reducer == "exact" && strategy.empty() ? Baseline::full_precision : Baseline::none;
  return run;
}

// A 2-worker ring all-reduce on the link: 2 alpha + n / B.
double allReduceMs(double bytes) { return 1000 * (2 * kLatency + bytes / kBandwidth); }

TEST(SyncCost, ASyncEveryHStepsIsItsExtraSpreadOverThem) {
  const StepPrediction local{10, 10, 0, 0};
  const StepPrediction sync{30, 10, 4, 16};
  for (const int64_t h : {1, 4, 32}) {
    const auto step = amortisedStep(local, {sync}, h, 1);
    EXPECT_DOUBLE_EQ(step.total_ms, 10 + 20.0 / h);
    EXPECT_DOUBLE_EQ(step.codec_ms, 4.0 / h);
    EXPECT_DOUBLE_EQ(step.exposed_comm_ms, 16.0 / h);
    EXPECT_DOUBLE_EQ(step.cu(), 10 / (10 + 20.0 / h));
  }
  // F fragments per period, each a sync step of its own: F extras per H steps.
  EXPECT_DOUBLE_EQ(amortisedStep(local, {sync, {20, 10, 2, 8}}, 8, 4).total_ms, 10 + 4 * 15.0 / 8);
  EXPECT_THROW(amortisedStep(local, {}, 4, 1), std::invalid_argument);
}

TEST(SyncCost, TheFormulaIsComputeOverComputePlusBytesOverBandwidth) {
  // H t = 32 x 0.1 s = 3.2 s against 100 MB at 12.5 MB/s = 8 s.
  EXPECT_DOUBLE_EQ(formulaCu(100, 32, 1e8, 1.25e7), 3.2 / (3.2 + 8));
  EXPECT_DOUBLE_EQ(formulaCu(100, 1, 0, 1.25e7), 1);
}

TEST(SyncCost, AStreamingExchangeShorterThanItsDelayIsHidden) {
  // H = 8, F = 2 (sends after steps 4 and 8), tau = 2: 20 ms of compute covers 15 ms, and the
  // network carries 30 ms per 80 ms period.
  EXPECT_DOUBLE_EQ(streamingExposedMsPerStep(10, {15, 15}, 8, 2), 0);
}

TEST(SyncCost, AStreamingExchangeLongerThanItsDelayExposesTheRest) {
  // tau = 1: each 25 ms exchange has 10 ms of compute to hide behind; 15 ms exposed, twice per 8 steps.
  EXPECT_DOUBLE_EQ(streamingExposedMsPerStep(10, {25, 25}, 8, 1), 2 * 15.0 / 8);
  // tau = 0 is a blocking exchange: all of it exposed.
  EXPECT_DOUBLE_EQ(streamingExposedMsPerStep(10, {25, 5}, 8, 0), 30.0 / 8);
}

TEST(SyncCost, StreamingExchangesQueueBehindEachOther) {
  // A send every step (H = F = 2) of 15 ms against 10 ms steps, with delays beyond what gcrun's
  // streaming-diloco accepts (tau < H / F; with it each exchange is done before the next starts):
  // however long the delay, the network sets the pace, 15 ms per step, 5 of them exposed.
  EXPECT_NEAR(streamingExposedMsPerStep(10, {15, 15}, 2, 1), 5, 1e-9);
  EXPECT_NEAR(streamingExposedMsPerStep(10, {15, 15}, 2, 6), 5, 1e-9);
}

TEST(SyncPrediction, APeriodicRunIsItsLocalStepWithTheSyncAmortisedAtEachH) {
  const double bytes = 4e6, compute_ms = 10, sync_ms = 2;
  const std::vector<outputs::RunData> runs = {runOf("diloco", "exact", "diloco")};
  const std::vector<RunTimeline> timelines = {dilocoRun(compute_ms, sync_ms, bytes)};
  PredictOptions options;
  options.networks = {network::linkProfile(kBandwidth, kLatency)};
  options.workers = {2};
  options.sync_every = {1, 4, 32};
  const auto rows = predictRuns(runs, timelines, options);
  ASSERT_EQ(rows.size(), 3u);
  const double extra = sync_ms + allReduceMs(bytes);
  for (size_t k = 0; k < rows.size(); ++k) {
    const double h = static_cast<double>(options.sync_every[k]);
    EXPECT_EQ(*rows[k].sync_every, options.sync_every[k]);
    EXPECT_NEAR(rows[k].predicted.total_ms, compute_ms + extra / h, 1e-9);
    EXPECT_NEAR(rows[k].predicted.cu(), compute_ms / (compute_ms + extra / h), 1e-12);
    EXPECT_NEAR(*rows[k].cu_formula, h * compute_ms / 1000 / (h * compute_ms / 1000 + bytes / kBandwidth), 1e-12);
    EXPECT_NEAR(rows[k].mib_per_step, bytes / h / (1 << 20), 1e-12);
  }
  // The measurement is the run's own H's alone: its mean step over the schedule.
  EXPECT_FALSE(rows[0].measured_ms_per_batch.has_value());
  ASSERT_TRUE(rows[1].measured_ms_per_batch.has_value());
  EXPECT_EQ(*rows[1].measured_ms_per_batch, 60);
  EXPECT_EQ(rows[1].measured_statistic, "mean");
}

TEST(SyncPrediction, WorkersMeetOnlyAtSyncsSoTheSlowestWorkersMeanLocalStepCounts) {
  // Worker 0's local steps take 10 and 30 ms, worker 1's 30 and 10: each step's slowest is 30 ms,
  // but each worker reaches the sync after 40 ms, a mean of 20 ms per local step.
  RunTimeline timeline = dilocoRun(0, 0, 4e6);
  for (size_t w = 0; w < 2; ++w) {
    for (auto& step : timeline.workers[w]) {
      if (!step.collectives.empty()) continue;  // the syncs: 0 ms of compute
      const bool slow = (step.step % 2 == 1) == (w == 0);
      step.items.front().us = 1000 * (slow ? 30 : 10);
    }
  }
  PredictOptions options;
  options.networks = {network::linkProfile(kBandwidth, kLatency)};
  options.shared_compute = false;
  const auto rows = predictRuns({runOf("diloco", "exact", "diloco")}, {timeline}, options);
  // Steps 1-8: local 1, 2, 3, 5, 6, 7 (worker 0, the slower: 30, 10, 30, 30, 10, 30), syncs at 4
  // and 8 with no compute.
  const double local = (30 + 10 + 30 + 30 + 10 + 30) / 6.0;
  EXPECT_NEAR(rows[0].predicted.total_ms, local + (allReduceMs(4e6) - local) / 4, 1e-9);
}

TEST(SyncPrediction, LocalSgdsWarmUpStepsAreLeftOut) {
  // Steps 1 and 2 exchange gradients (local-sgd's warm-up), then local steps and syncs at 4 and 8.
  RunTimeline timeline = dilocoRun(10, 0, 4e6);
  for (auto& worker : timeline.workers) {
    for (size_t k = 0; k < 2; ++k) worker[k] = blockingStep(worker[k].step, 10, 0, 8e6);
  }
  auto run = runOf("local-sgd", "exact", "local-sgd");
  run.settings["sync.warmup_steps"] = "2";
  timeline.schedule = {"local-sgd", true, 4, 1, 0, false, 2};
  PredictOptions options;
  options.networks = {network::linkProfile(kBandwidth, kLatency)};
  const auto rows = predictRuns({run}, {timeline}, options);
  EXPECT_NEAR(rows[0].predicted.total_ms, 10 + allReduceMs(4e6) / 4, 1e-9);
  EXPECT_EQ(syncScheduleOf(run).warmup_steps, 2);
}

// Two workers over steps 1-16 of streaming-diloco with H = 8, F = 1, tau = 2: 100 ms of compute
// per step, and after steps 8 and 16 an exchange that costs 300 ms on the link, traced as run in
// the background (`background`) or blocking.
RunTimeline streamingRun(bool background) {
  RunTimeline timeline;
  timeline.schedule = {"streaming-diloco", true, 8, 1, 2, true};
  const double bytes = (0.3 - 2 * kLatency) * kBandwidth;  // allReduceMs(bytes) = 300
  for (int w = 0; w < 2; ++w) {
    std::vector<StepProgram> steps;
    for (int64_t step = 1; step <= 16; ++step) {
      steps.push_back(step % 8 == 0 ? blockingStep(step, 100, 0, bytes) : localStep(step, 100));
      if (step % 8 == 0) steps.back().collectives.front().background = background;
    }
    timeline.workers.push_back(steps);
  }
  return timeline;
}

// The exchange starts after step 8 (at 800 ms) and is waited for after step 10 (at 1000 ms): 200
// of its 300 ms hide behind steps 9 and 10, 100 ms are exposed once per 8 steps. Blocking, all
// 300 ms are.
TEST(SyncPrediction, ABackgroundExchangeCostsWhatItsDelayDoesNotHide) {
  PredictOptions options;
  options.networks = {network::linkProfile(kBandwidth, kLatency)};
  options.workers = {2};
  const auto overlapped = predictRuns({runOf("streaming", "exact", "streaming-diloco")}, {streamingRun(true)}, options);
  ASSERT_EQ(overlapped.size(), 1u);
  EXPECT_NEAR(overlapped[0].predicted.total_ms, 100 + 100.0 / 8, 1e-9);
  EXPECT_NEAR(overlapped[0].predicted.exposed_comm_ms, 100.0 / 8, 1e-9);
  EXPECT_NEAR(*overlapped[0].overlapped_ms, 100 + 100.0 / 8, 1e-9);
  // A run whose exchanges blocked is costed blocking; what overlap would give stays beside it.
  const auto blocking = predictRuns({runOf("streaming", "exact", "streaming-diloco")}, {streamingRun(false)}, options);
  EXPECT_NEAR(blocking[0].predicted.total_ms, 100 + 300.0 / 8, 1e-9);
  EXPECT_NEAR(*blocking[0].overlapped_ms, 100 + 100.0 / 8, 1e-9);
  // At H = 4 the same exchange every 4 steps: still 100 ms exposed per send.
  options.sync_every = {4};
  const auto at4 = predictRuns({runOf("streaming", "exact", "streaming-diloco")}, {streamingRun(true)}, options);
  EXPECT_NEAR(at4[0].predicted.total_ms, 100 + 100.0 / 4, 1e-9);
}

TEST(SyncPrediction, APeriodicTimelineWithoutASyncStepIsRefused) {
  const auto run = runOf("diloco", "exact", "diloco");
  // loadRunTimeline names the run (a UserError, tested end to end); a timeline made otherwise
  // breaks predictRun's contract.
  RunTimeline timeline = dilocoRun(10, 0, 1e6);
  for (auto& worker : timeline.workers) worker.erase(worker.begin() + 3, worker.end());  // steps 1-3
  PredictOptions options;
  options.networks = {network::linkProfile(kBandwidth, kLatency)};
  EXPECT_THROW(predictRuns({run}, {timeline}, options), std::invalid_argument);
}

TEST(SyncPrediction, RunsOfOneModelReplayOneCompute) {
  // Exact measured 40 ms per step, PowerSGD 20 ms on the same model and batch: under load, not
  // by method. Shared: both replay 30 ms, and the difference left is the network's.
  const std::vector<outputs::RunData> runs = {runOf("exact", "exact"), runOf("psgd", "powersgd")};
  const std::vector<RunTimeline> timelines = {everyStepRun({40, 40, 40}, 1e6), everyStepRun({20, 20, 20}, 1e4)};
  PredictOptions options;
  options.networks = {network::linkProfile(kBandwidth, kLatency)};
  const auto shared = predictRuns(runs, timelines, options);
  EXPECT_NEAR(shared[0].predicted.total_ms, 30 + allReduceMs(1e6), 1e-9);
  EXPECT_NEAR(shared[1].predicted.total_ms, 30 + allReduceMs(1e4), 1e-9);
  EXPECT_DOUBLE_EQ(shared[1].compute_basis_ms, 30);
  options.shared_compute = false;
  const auto own = predictRuns(runs, timelines, options);
  EXPECT_NEAR(own[1].predicted.total_ms, 20 + allReduceMs(1e4), 1e-9);
  const auto lines = computeMismatches(runs, timelines);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("exact computed a step in 40.0 ms and psgd in 20.0 ms"), std::string::npos) << lines[0];
  // Steps slowed by load on one worker (400 ms at steps 2 and 3 of worker 1) move the run's own
  // prediction, not the shared one.
  auto loaded = timelines;
  for (const int64_t step : {2, 3}) loaded[0].workers[1][step - 1].items.front().us = 400e3;
  options.shared_compute = true;
  EXPECT_NEAR(predictRuns(runs, loaded, options)[0].predicted.total_ms, 30 + allReduceMs(1e6), 1e-9);
  options.shared_compute = false;
  EXPECT_NEAR(predictRuns(runs, loaded, options)[0].predicted.total_ms, 400 + allReduceMs(1e6), 1e-9);
  // Within the steps' own spread, no line.
  const std::vector<RunTimeline> close = {everyStepRun({40, 44, 36, 40}, 1e6), everyStepRun({38, 38, 38, 38}, 1e4)};
  EXPECT_TRUE(computeMismatches(runs, close).empty());
}

TEST(SyncPrediction, ASpeedupWithinTheStepsSpreadIsNoDifference) {
  const std::vector<outputs::RunData> runs = {runOf("exact", "exact"), runOf("fp16", "fp16")};
  // Steps of 80 to 120 ms: half the interquartile range (90 to 110) is 10% of the median.
  const std::vector<RunTimeline> timelines = {everyStepRun({80, 90, 100, 110, 120}, 1e3),
                                              everyStepRun({80, 90, 100, 110, 120}, 5e2)};
  PredictOptions options;
  options.networks = {network::linkProfile(kBandwidth, kLatency)};
  options.shared_compute = false;
  auto rows = predictRuns(runs, timelines, options);
  EXPECT_NEAR(rows[1].noise, 0.1, 1e-3);
  EXPECT_EQ(speedupText(rows[1].speedup_vs_exact, rows[1].noise), "no difference");
  // Sharing one compute takes the steps' spread out; 1% stays, below which a replay tells nothing.
  options.shared_compute = true;
  rows = predictRuns(runs, timelines, options);
  EXPECT_DOUBLE_EQ(rows[1].noise, 0.01);
  EXPECT_EQ(speedupText(rows[1].speedup_vs_exact, rows[1].noise), "no difference");
  EXPECT_EQ(speedupText(1.5, 0.1), "1.50x");
  EXPECT_EQ(speedupText(std::nullopt, 0.1), "");
}

TEST(Recommendation, TheCheapestConfigurationReachingTheTargetCu) {
  const std::vector<outputs::RunData> runs = {runOf("exact", "exact"), runOf("diloco", "exact", "diloco")};
  const std::vector<RunTimeline> timelines = {everyStepRun({10, 10, 10}, 4e6), dilocoRun(10, 0, 4e6)};
  PredictOptions options;
  options.networks = {network::linkProfile(kBandwidth, kLatency)};
  options.sync_every = {1, 4, 16, 64};
  const auto rows = predictRuns(runs, timelines, options);
  // Exact: CU 10 / (10 + 32.04) = 0.24; diloco at H: 10 / (10 + 32.04 / H) -> 0.24, 0.56, 0.83, 0.95.
  const auto picked = recommend(rows, 0.8, QualityRule{});
  ASSERT_EQ(picked.size(), 1u);
  ASSERT_TRUE(picked[0].pick.has_value());
  EXPECT_EQ(*rows[*picked[0].pick].sync_every, 16);
  EXPECT_NE(recommendationLine(picked[0], rows, 0.8).find("run diloco (diloco H=16, exact) reaches CU 0.83"),
            std::string::npos)
      << recommendationLine(picked[0], rows, 0.8);
  const auto none = recommend(rows, 0.99, QualityRule{});
  EXPECT_FALSE(none[0].pick.has_value());
  EXPECT_EQ(*rows[none[0].highest_cu].sync_every, 64);
  EXPECT_NE(recommendationLine(none[0], rows, 0.99).find("no configuration reaches CU 0.99"), std::string::npos);
}

TEST(SyncPrediction, BadWhatIfsAreOneLineNamingTheFlag) {
  EXPECT_EQ(parseSyncEvery("32", "--sync-every"), 32);
  EXPECT_DOUBLE_EQ(parseTargetCu("0.9", "--target-cu"), 0.9);
  for (const char* bad : {"0", "-1", "1.5", "x", "1e9"}) {
    EXPECT_THROW(parseSyncEvery(bad, "--sync-every"), UserError) << bad;
  }
  for (const char* bad : {"0", "1.5", "-0.1", "nan", "90%"}) {
    EXPECT_THROW(parseTargetCu(bad, "--target-cu"), UserError) << bad;
  }
  try {
    parseTargetCu("1.5", "--target-cu");
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(),
                 "--target-cu: '1.5' is not a compute utilisation; expected a share above 0 up to 1, e.g. 0.9");
  }
  EXPECT_THROW(parseComputeProfile("median", "--compute-profile"), UserError);
}

}  // namespace
}  // namespace gcrun::performance
