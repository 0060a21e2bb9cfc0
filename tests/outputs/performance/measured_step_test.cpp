// What gcrun predict shows as a run's measured time per step, on hand-written runs: the median
// step, or, for a run that syncs models every H steps (its local steps and syncs differ), the mean
// over the schedule, saying which (predict.csv's measured_statistic, the table's "(mean)").
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "tests/support/command.h"
#include "tests/support/crafted_trace.h"
#include "tests/support/temp_dir.h"

namespace gcrun {
namespace {

using testing::contains;
using testing::runCommand;
using testing::TempDir;

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// A completed 2-worker run whose timer measured a median step of 63 ms and a mean one of 200 ms.
std::string measuredRun(const TempDir& dir, const std::string& name, const std::string& run_json_extra,
                        const std::string& config, int64_t every) {
  const auto run = dir.file(name);
  std::filesystem::create_directories(run);
  write(run + "/run.json", "{\"status\": \"completed\", \"world_size\": 2" + run_json_extra + "}\n");
  write(run + "/config.yaml", config);
  write(run + "/timer_summary.json",
        "{\"batch\": {\"label\": \"batch\", \"median_duration\": 0.063, \"average_duration\": 0.2, "
        "\"n_events\": 99, \"total_time\": 19.8}}\n");
  write(run + "/trace-rank0.json",
        testing::craftedTrace([every](int64_t step) -> int64_t { return step % every == 0 ? 4000000 : 0; }));
  return run;
}

// predict.csv's only row, by column.
std::map<std::string, std::string> onlyRow(const std::string& csv) {
  std::istringstream lines(csv);
  std::string header, row;
  std::getline(lines, header);
  std::getline(lines, row);
  std::map<std::string, std::string> cells;
  std::stringstream names(header), values(row);
  for (std::string name, value; std::getline(names, name, ',');) {
    std::getline(values, value, ',');
    cells[name] = value;
  }
  return cells;
}

const std::string kGcrun = GCRUN_BINARY_PATH;

TEST(MeasuredStep, ARunThatSyncsEveryHStepsIsMeasuredByItsMeanStep) {
  TempDir dir;
  // diloco at H = 4, from its config.yaml (a run from before schedules were recorded) and from
  // the schedule its run.json records.
  const std::vector<std::string> runs = {
      measuredRun(dir, "old", "", "sync:\n  strategy: diloco\n  every: 4\n", 4),
      measuredRun(dir, "recorded",
                  ", \"schedule\": {\"strategy\": \"diloco\", \"periodic\": true, \"every\": 4, \"fragments\": 1, "
                  "\"delay\": 0, \"overlapped\": false, \"warmup_steps\": 0}",
                  "", 4)};
  for (const auto& run : runs) {
    SCOPED_TRACE(run);
    const auto out = run + "-predicted";
    const auto result = runCommand(kGcrun + " predict " + run + " --bandwidth 1gbit --output " + out);
    ASSERT_EQ(result.exit_code, 0) << result.output;
    const auto row = onlyRow(read(out + "/predict.csv"));
    EXPECT_EQ(row.at("sync_every"), "4");
    EXPECT_EQ(row.at("measured_ms_per_batch"), "200") << read(out + "/predict.csv");
    EXPECT_EQ(row.at("measured_statistic"), "mean");
    EXPECT_TRUE(contains(result.output, "| 200.0 (mean) |")) << result.output;
    EXPECT_TRUE(contains(read(out + "/predict.md"), "the mean over the schedule"));
  }
}

TEST(MeasuredStep, ARunThatExchangesEveryStepIsMeasuredByItsMedianStep) {
  TempDir dir;
  const auto run = measuredRun(dir, "every-step", "", "reducer:\n  name: exact\n", 1);
  const auto result = runCommand(kGcrun + " predict " + run + " --bandwidth 1gbit --output " + dir.file("out"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto row = onlyRow(read(dir.file("out/predict.csv")));
  EXPECT_EQ(row.at("measured_ms_per_batch"), "63");
  EXPECT_EQ(row.at("measured_statistic"), "median");
  EXPECT_TRUE(contains(result.output, "| 63.0 |")) << result.output;
}

}  // namespace
}  // namespace gcrun
