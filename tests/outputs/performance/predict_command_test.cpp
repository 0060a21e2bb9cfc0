// gcrun predict and gcrun report --predict end to end on small real runs, the input they refuse,
// and a study's prediction from its files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
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
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"predict " + runs + " --bandwidth 10gbps", "10gbps"},
      {"predict " + runs + " --latency=-20us", "-20us"},
      {"predict " + runs + " --workers 0", "--workers"},
      {"predict " + dir_->file("untraced"), "output.trace"},
      {"predict " + runs + " --network " + dir_->file("corrupt.yaml"), "corrupt.yaml"},
      {"predict " + runs + " --network " + dir_->file("missing.yaml"), "missing.yaml"},
      {"predict " + runs + " --target accuracy", "--target"},
      {"report " + runs + " --predict workers=16", "--predict"},
  };
  for (const auto& [arguments, named] : cases) {
    const auto result = gcrun(arguments + " --output " + dir_->file("refused"));
    EXPECT_EQ(result.exit_code, 2) << arguments << "\n" << result.output;
    EXPECT_EQ(lineCount(result.output), 1u) << arguments << "\n" << result.output;
    EXPECT_TRUE(contains(result.output, named)) << arguments << "\n" << result.output;
  }
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
