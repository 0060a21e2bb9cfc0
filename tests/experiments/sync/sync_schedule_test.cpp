// Each strategy's declared schedule (SynchronizerSpec::schedule) against its settings, and the one
// send-step formula against its closed form and against the steps streaming-diloco sends at.
#include <gtest/gtest.h>

#include <set>

#include "experiments/sync/streaming_diloco.h"
#include "experiments/sync/synchronizer.h"
#include "hyperparams/base/sync_schedule.h"

namespace gcrun::experiments {
namespace {

SyncSchedule declared(const std::string& strategy, const SettingValues& values) {
  ExperimentConfig config;
  config.sync.strategy = strategy;
  config.sync.settings = values;
  const auto& schedule = synchronizerRegistry().at(strategy).factory.schedule;
  EXPECT_TRUE(schedule) << strategy << " declares no schedule";
  return schedule ? schedule(config) : SyncSchedule{};
}

SyncSchedule expected(const std::string& strategy, bool periodic, int64_t every, int64_t fragments = 1,
                      int64_t delay = 0, bool overlapped = false, int64_t warmup_steps = 0) {
  return {strategy, periodic, every, fragments, delay, overlapped, warmup_steps};
}

TEST(SyncSchedule, EachStrategyDeclaresWhenItSendsFromItsSettings) {
  EXPECT_EQ(declared("every-step", {}), expected("every-step", false, 1));
  EXPECT_EQ(declared("demo", {}), expected("demo", false, 1));
  EXPECT_EQ(declared("local-sgd", {{"every", int64_t{8}}, {"warmup_steps", int64_t{5}}}),
            expected("local-sgd", true, 8, 1, 0, false, 5));
  EXPECT_EQ(declared("diloco", {{"every", int64_t{16}}}), expected("diloco", true, 16));
  EXPECT_EQ(declared("sparseloco", {{"every", int64_t{4}}}), expected("sparseloco", true, 4));
  EXPECT_EQ(declared("streaming-diloco", {{"every", int64_t{12}}, {"fragments", int64_t{3}}, {"delay", int64_t{2}}}),
            expected("streaming-diloco", true, 12, 3, 2, true));
  // Its defaults when a key is not given: the settings' own.
  EXPECT_EQ(declared("diloco", {}).every, 32);
}

TEST(SyncSchedule, EveryBuiltInStrategyDeclaresAScheduleGcrunAccepts) {
  for (const auto* entry : synchronizerRegistry().entries()) {
    SCOPED_TRACE(entry->name);
    const auto schedule = declared(entry->name, {});
    EXPECT_EQ(scheduleProblem(schedule), "");
    EXPECT_EQ(schedule.strategy, entry->name);
  }
}

TEST(SyncSchedule, FragmentPSendsAtItsClosedForm) {
  // ((p + 1) H / F) mod H: F sends spaced H/F apart, the last at the period's end.
  EXPECT_EQ(sendOffset(0, 4, 8), 2);
  EXPECT_EQ(sendOffset(1, 4, 8), 4);
  EXPECT_EQ(sendOffset(2, 4, 8), 6);
  EXPECT_EQ(sendOffset(3, 4, 8), 0);
  EXPECT_EQ(sendOffset(0, 1, 5), 0);  // F = 1: every H-th step
  EXPECT_EQ(sendOffset(0, 3, 10), 3);
  EXPECT_EQ(sendOffset(1, 3, 10), 6);
  for (const int64_t every : {1, 7, 32}) {
    for (int64_t fragments = 1; fragments <= every; ++fragments) {
      std::set<int64_t> offsets;
      for (int64_t p = 0; p < fragments; ++p) offsets.insert(sendOffset(p, fragments, every));
      EXPECT_EQ(static_cast<int64_t>(offsets.size()), fragments) << every << " " << fragments;
    }
  }
}

TEST(SyncSchedule, StreamingDilocoSendsAtTheFormulasSteps) {
  for (int64_t step = 1; step <= 24; ++step) {
    const auto sender = streamingSender(step, 8, 4);
    std::optional<size_t> formula;
    for (int64_t p = 0; p < 4; ++p) {
      if (step % 8 == sendOffset(p, 4, 8)) formula = static_cast<size_t>(p);
    }
    EXPECT_EQ(sender, formula) << step;
  }
}

TEST(SyncSchedule, AScheduleFromElsewhereIsCheckedFieldByField) {
  EXPECT_EQ(scheduleProblem(expected("diloco", true, 8, 2, 1, true)), "");
  EXPECT_NE(scheduleProblem(expected("diloco", true, 0)).find("every is 0"), std::string::npos);
  EXPECT_NE(scheduleProblem(expected("diloco", true, 2000000)).find("every is 2000000"), std::string::npos);
  EXPECT_NE(scheduleProblem(expected("diloco", true, 4, 5)).find("fragments is 5; expected a whole number from 1 to 4"),
            std::string::npos);
  EXPECT_NE(scheduleProblem(expected("diloco", true, 4, 1, -1)).find("delay is -1"), std::string::npos);
  EXPECT_NE(scheduleProblem(expected("every-step", false, 4)).find("every is 4; expected a whole number from 1 to 1"),
            std::string::npos);
  EXPECT_NE(scheduleProblem(expected("a\nb", false, 1)).find("strategy"), std::string::npos);
  EXPECT_NE(scheduleProblem(expected("", false, 1)).find("strategy"), std::string::npos);
}

}  // namespace
}  // namespace gcrun::experiments
