// gcrun predict and gcrun report --predict end to end on small real runs, the input they refuse,
// and a study's prediction from its files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "tests/support/command.h"
#include "tests/support/temp_dir.h"

namespace gcrun::performance {
namespace {

using testing::contains;
using testing::runCommand;
using testing::TempDir;

testing::CommandResult gcrun(const std::string& arguments) {
  return runCommand(std::string(GCRUN_BINARY_PATH) + " " + arguments);
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

size_t lineCount(const std::string& text) {
  size_t lines = 0;
  for (const char c : text) lines += c == '\n';
  return lines;
}

// Two traced 2-process runs, exact and PowerSGD, made once for the suite.
class PredictCommand : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    for (const char* preset : {"fashion-sgd", "fashion-powersgd-rank2"}) {
      const auto result = gcrun(std::string("experiment ") + preset + " --nproc-per-node 2 --output-dir " +
                                dir_->file(std::string("runs/") + preset) +
                                " --set training.max_steps=8 --set output.trace=3-7 --set evaluation.max_samples=200");
      ASSERT_EQ(result.exit_code, 0) << result.output;
    }
    // diloco syncing every 4 steps, traced over steps 1-10 (syncs after 4 and 8), beside a copy of
    // the exact run; and one traced over steps 1-3, before its first sync.
    const std::string diloco =
        "experiment fashion-sgd --nproc-per-node 2 --set sync.strategy=diloco --set sync.every=4 "
        "--set sync.drift=false --set evaluation.max_samples=200 --output-dir ";
    auto result =
        gcrun(diloco + dir_->file("sync-runs/diloco") + " --set training.max_steps=10 --set output.trace=1-10");
    ASSERT_EQ(result.exit_code, 0) << result.output;
    std::filesystem::copy(dir_->file("runs/fashion-sgd"), dir_->file("sync-runs/exact"),
                          std::filesystem::copy_options::recursive);
    result = gcrun(diloco + dir_->file("nosync/diloco") + " --set training.max_steps=3 --set output.trace=1-3");
    ASSERT_EQ(result.exit_code, 0) << result.output;
    const auto untraced = gcrun("experiment fashion-sgd --output-dir " + dir_->file("untraced") +
                                " --set training.max_steps=2 --set evaluation.max_samples=200");
    ASSERT_EQ(untraced.exit_code, 0) << untraced.output;
  }
  static void TearDownTestSuite() { delete dir_; }
  static TempDir* dir_;
};
TempDir* PredictCommand::dir_ = nullptr;

TEST_F(PredictCommand, PredictsEveryRunAtEveryWorkerCountAndNetwork) {
  const auto out = dir_->file("predicted");
  const auto result = gcrun("predict " + dir_->file("runs") + " --workers 2,16 --bandwidth 100mbit,10gbit " +
                            "--latency 20us --target test.accuracy=0.01 --output " + out);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(contains(result.output, "| fashion-powersgd-rank2 | powersgd | 16 | 100mbit/20us |")) << result.output;
  // The answer first: the matrix of the fastest method, then every row.
  EXPECT_EQ(result.output.rfind("Fastest method by worker count", 0), 0u) << result.output;
  const auto matrix = result.output.find("| workers | 100mbit/20us | 10gbit/20us |");
  EXPECT_LT(matrix, result.output.find("| run | reducer |")) << result.output;
  EXPECT_TRUE(contains(result.output, "| 16 | fashion-powersgd-rank2 ")) << result.output;
  const auto csv = read(out + "/predict.csv");
  EXPECT_EQ(lineCount(csv), 1u + 2 * 2 * 2);
  for (const char* column : {"run,reducer,workers,network,measured_ms_per_batch,predicted_ms_per_batch,compute_ms,",
                             "exposed_comm_ms,codec_ms,", "speedup_vs_exact,speedup_vs_fp16,", "steps_to_target"}) {
    EXPECT_TRUE(contains(csv, column)) << column;
  }
  // PowerSGD sends ~50x less: on 100 Mbit/s at 16 workers it must be predicted faster than exact.
  std::istringstream rows(csv);
  std::string line;
  double exact_ms = 0, powersgd_ms = 0;
  while (std::getline(rows, line)) {
    std::vector<std::string> cells;
    std::stringstream cellsOf(line);
    for (std::string cell; std::getline(cellsOf, cell, ',');) cells.push_back(cell);
    if (cells.size() < 6 || cells[2] != "16" || cells[3] != "100mbit/20us") continue;
    (cells[1] == "exact" ? exact_ms : powersgd_ms) = std::stod(cells[5]);
  }
  EXPECT_GT(exact_ms, 2 * powersgd_ms) << csv;
  EXPECT_TRUE(std::filesystem::is_regular_file(out + "/predict.md"));
  EXPECT_TRUE(std::filesystem::is_regular_file(out + "/plots/predicted-time-vs-bandwidth-w16.dat"));
  EXPECT_TRUE(std::filesystem::is_regular_file(out + "/plots/speedup-matrix.dat"));
}

TEST_F(PredictCommand, ReportHasTheProjectedAndTargetColumns) {
  const auto out = dir_->file("report");
  const auto result = gcrun("report " + dir_->file("runs") +
                            " --predict workers=16,bandwidth=10gbit --target test.accuracy=0.01 --output " + out);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto md = read(out + "/report.md");
  for (const char* column : {"time to target (measured)", "projected time/batch (16 workers, 10gbit/20us)",
                             "projected speedup vs exact", "projected time to target"}) {
    EXPECT_TRUE(contains(md, column)) << column << "\n" << md;
  }
  EXPECT_TRUE(contains(read(out + "/report.csv"), "projected_ms_per_batch"));
}

TEST_F(PredictCommand, BadInputIsOneLineNamingIt) {
  const auto runs = dir_->file("runs");
  std::ofstream(dir_->file("corrupt.yaml")) << "bandwidth: [1gbit\n";
  std::ofstream(dir_->file("float8.yaml")) << "fits:\n  - {collective: all-reduce, world_size: 2, dtype: float8, "
                                              "latency_s: 1e-5, seconds_per_byte: 1e-9}\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"predict " + runs + " --bandwidth 10gbps", "10gbps"},
      {"predict " + runs + " --latency=-20us", "-20us"},
      {"predict " + runs + " --workers 0", "--workers"},
      {"predict " + dir_->file("untraced"), "output.trace"},
      {"predict " + runs + " --network " + dir_->file("corrupt.yaml"), "corrupt.yaml"},
      {"predict " + runs + " --network " + dir_->file("missing.yaml"), "missing.yaml"},
      {"predict " + runs + " --target accuracy", "--target"},
      {"report " + runs + " --predict workers=16", "--predict"},
      {"predict " + runs + " --network " + dir_->file("float8.yaml"), "fits[0].dtype: 'float8'"},
      {"predict " + runs + " --sync-every 0", "--sync-every"},
      {"predict " + runs + " --target-cu 1.5", "--target-cu"},
      {"predict " + runs + " --compute-profile median", "--compute-profile"},
      {"predict " + dir_->file("nosync"), "no sync step"},
  };
  for (const auto& [arguments, named] : cases) {
    const auto result = gcrun(arguments + " --output " + dir_->file("refused"));
    EXPECT_EQ(result.exit_code, 2) << arguments << "\n" << result.output;
    EXPECT_EQ(lineCount(result.output), 1u) << arguments << "\n" << result.output;
    EXPECT_TRUE(contains(result.output, named)) << arguments << "\n" << result.output;
  }
}

// The predict.csv rows as maps from the header's names.
std::vector<std::map<std::string, std::string>> csvRows(const std::string& csv) {
  std::vector<std::map<std::string, std::string>> rows;
  std::istringstream lines(csv);
  std::vector<std::string> header;
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> cells;
    std::stringstream cellsOf(line + ",");
    for (std::string cell; std::getline(cellsOf, cell, ',');) cells.push_back(cell);
    if (header.empty()) {
      header = cells;
      continue;
    }
    std::map<std::string, std::string> row;
    for (size_t k = 0; k < header.size() && k < cells.size(); ++k) row[header[k]] = cells[k];
    rows.push_back(row);
  }
  return rows;
}

TEST_F(PredictCommand, ARunThatSyncsModelsIsPredictedOverH) {
  const auto out = dir_->file("sync-predicted");
  const auto result = gcrun("predict " + dir_->file("sync-runs") +
                            " --workers 4 --bandwidth 10mbit --sync-every 1,4,16 --target-cu 0.5 --output " + out);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto rows = csvRows(read(out + "/predict.csv"));
  ASSERT_EQ(rows.size(), 4u);                               // exact once, diloco at each H
  std::map<std::string, std::pair<double, double>> diloco;  // H -> (ms, CU)
  for (const auto& row : rows) {
    if (row.at("strategy") == "diloco")
      diloco[row.at("sync_every")] = {std::stod(row.at("predicted_ms_per_batch")), std::stod(row.at("cu"))};
  }
  ASSERT_EQ(diloco.size(), 3u) << read(out + "/predict.csv");
  // A sync of the whole model at 10 Mbit/s takes far longer than a step; its extra time over a
  // local step is spread over H steps: t(1) - t(4) = 3/4 x, t(4) - t(16) = 3/16 x.
  EXPECT_GT(diloco["1"].first, 2 * diloco["4"].first);
  EXPECT_NEAR((diloco["1"].first - diloco["4"].first) / (diloco["4"].first - diloco["16"].first), 4, 1e-3);
  EXPECT_LT(diloco["1"].second, diloco["4"].second);
  EXPECT_LT(diloco["4"].second, diloco["16"].second);
  EXPECT_TRUE(contains(result.output, "recommended: 10mbit/20us, 4 workers:")) << result.output;
  EXPECT_TRUE(contains(read(out + "/predict.md"), "diloco H=16")) << read(out + "/predict.md");
}

// Rank 0 records the schedule diloco declared; a run from before it was recorded (run.json
// without "schedule") falls back to its config.yaml and is predicted exactly alike.
TEST_F(PredictCommand, ARecordedScheduleAndAnOldRunsFallbackPredictAlike) {
  const auto recorded = dir_->file("schedule/recorded/diloco");
  const auto old = dir_->file("schedule/old/diloco");
  for (const auto& copy : {recorded, old}) {
    std::filesystem::create_directories(std::filesystem::path(copy).parent_path());
    std::filesystem::copy(dir_->file("sync-runs/diloco"), copy, std::filesystem::copy_options::recursive);
  }
  auto run_json = read(old + "/run.json");
  const auto from = run_json.find("\"schedule\": {");
  ASSERT_NE(from, std::string::npos) << run_json;
  const auto to = run_json.find('}', from);
  EXPECT_TRUE(contains(run_json.substr(from, to - from), "\"every\": 4")) << run_json;
  EXPECT_TRUE(contains(run_json.substr(from, to - from), "\"strategy\": \"diloco\"")) << run_json;
  const auto comma = run_json.rfind(',', from);  // after the key before it
  run_json.erase(comma, to + 1 - comma);
  std::ofstream(old + "/run.json") << run_json;
  std::map<std::string, std::string> csv;
  for (const auto& run : {recorded, old}) {
    const auto out = run + "-predicted";
    const auto result =
        gcrun("predict " + run + " --workers 2,8 --bandwidth 10mbit,10gbit --sync-every 2,4 --output " + out);
    ASSERT_EQ(result.exit_code, 0) << result.output;
    csv[run] = read(out + "/predict.csv");
  }
  EXPECT_FALSE(contains(read(old + "/run.json"), "\"schedule\": {")) << read(old + "/run.json");
  EXPECT_TRUE(contains(csv[old], ",mean\n")) << csv[old];  // its run.json read: measured at its own H
  EXPECT_EQ(csv[recorded], csv[old]);
  EXPECT_EQ(lineCount(csv[old]), 1u + 2 * 2 * 2) << csv[old];
}

TEST_F(PredictCommand, AHundredRunsArePredictedInSeconds) {
  const auto many = dir_->file("many");
  std::filesystem::create_directories(many);
  for (int i = 0; i < 100; ++i) {
    std::filesystem::copy(dir_->file("runs/fashion-powersgd-rank2"), many + "/run" + std::to_string(i),
                          std::filesystem::copy_options::recursive);
  }
  const auto start = std::chrono::steady_clock::now();
  const auto result = gcrun("predict " + many + " --workers 2,16,64 --output " + dir_->file("many-out"));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(lineCount(read(dir_->file("many-out/predict.csv"))), 1u + 100 * 3 * 3);
  // A bound, not a benchmark: a model that replayed every worker would take minutes.
  EXPECT_LT(seconds, 60) << seconds;
}

}  // namespace
}  // namespace gcrun::performance
