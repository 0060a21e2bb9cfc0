// output.layer_stats_every_steps on real training over Gloo: layers.csv against run.json's bits
// and the reducers' closed forms, and metrics.jsonl unchanged by turning it on.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "experiments/setup/resolved_experiment.h"
#include "experiments/worker/runner.h"
#include "outputs/layers/layer_stats.h"
#include "outputs/run_directory.h"
#include "tests/support/multi_rank.h"
#include "tests/support/temp_dir.h"

namespace gcrun {
namespace {

using comm::Communicator;
using testing::runRanks;
using testing::TempDir;

void train(const std::string& dir, const std::string& preset, std::vector<std::string> overrides) {
  overrides.insert(overrides.begin(), {"task.synthetic=true", "training.max_steps=6", "output.sinks=[jsonl]"});
  const auto config = experiments::layeredConfig(preset, "", overrides);
  runRanks(2, [&](Communicator& comm) { experiments::runWorker(experiments::resolve(config), {dir}, comm); });
}

std::vector<outputs::LayerStatsRow> rowsOf(const std::string& dir) {
  std::ifstream in(dir + "/" + outputs::run_files::kLayers);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, outputs::kLayerStatsHeader);
  std::vector<outputs::LayerStatsRow> rows;
  while (std::getline(in, line)) {
    auto row = outputs::parseLayerStatsRow(line);
    EXPECT_TRUE(row) << line;
    if (row) rows.push_back(std::move(*row));
  }
  return rows;
}

uint64_t bitsSent(const std::string& dir) { return outputs::RunDirectory(dir).readInfo()->bits_sent; }

TEST(LayersCsv, PowerSgdRowsAddUpToTheBitsSentWithTheirRanks) {
  TempDir dir;
  train(dir.file("run"), "fashion-powersgd-rank2", {"output.layer_stats_every_steps=1"});
  const auto rows = rowsOf(dir.file("run"));
  ASSERT_FALSE(rows.empty());
  ASSERT_EQ(rows.size() % 6, 0u);  // every step, each parameter once
  uint64_t total = 0;
  for (const auto& row : rows) {
    total += *row.bits;
    int64_t elements = 1;
    for (int64_t size : row.shape) elements *= size;
    EXPECT_EQ(row.elements, elements) << row.parameter;
    EXPECT_GT(row.grad_norm, 0) << row.parameter;
    ASSERT_TRUE(row.rel_compression_error) << row.parameter;
    EXPECT_GE(*row.rel_compression_error, 0) << row.parameter;
    if (row.shape.size() <= 1) {
      // Vectors travel uncompressed: 32 bits an element, nothing lost, no rank.
      EXPECT_EQ(*row.bits, 32u * static_cast<uint64_t>(elements)) << row.parameter;
      EXPECT_EQ(*row.rel_compression_error, 0) << row.parameter;
      EXPECT_FALSE(row.rank) << row.parameter;
    } else {
      const int64_t n = row.shape[0], m = elements / n, r = std::min({n, m, int64_t{2}});
      EXPECT_EQ(row.rank, r) << row.parameter;
      EXPECT_EQ(*row.bits, 32u * static_cast<uint64_t>(r * (n + m))) << row.parameter;
      EXPECT_GT(*row.rel_compression_error, 0) << row.parameter;
    }
  }
  EXPECT_EQ(total, bitsSent(dir.file("run")));
}

TEST(LayersCsv, ExactAveragingSendsEveryFloatAndLosesNothing) {
  TempDir dir;
  train(dir.file("run"), "fashion-sgd", {"output.layer_stats_every_steps=2"});
  const auto rows = rowsOf(dir.file("run"));
  std::set<int64_t> steps;
  uint64_t total = 0;
  for (const auto& row : rows) {
    steps.insert(row.step);
    total += *row.bits;
    EXPECT_EQ(*row.bits, 32u * static_cast<uint64_t>(row.elements)) << row.parameter;
    EXPECT_EQ(row.rel_compression_error, 0.0) << row.parameter;
    EXPECT_FALSE(row.rank);
  }
  EXPECT_EQ(steps, (std::set<int64_t>{2, 4, 6}));
  EXPECT_EQ(total, bitsSent(dir.file("run")) / 2);  // half the steps sampled, each sending the same
}

// metrics.jsonl without its clock fields.
std::vector<std::string> seededEvents(const std::string& dir) {
  std::ifstream in(dir + "/" + outputs::run_files::kMetrics);
  std::vector<std::string> events;
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"elapsed_s\"") == std::string::npos && line.find("\"time_per_batch\"") == std::string::npos) {
      events.push_back(line);
    }
  }
  return events;
}

TEST(LayersCsv, TurningItOnChangesNoMetric) {
  TempDir dir;
  train(dir.file("off"), "fashion-powersgd-rank2", {"output.log_every_steps=2"});
  train(dir.file("on"), "fashion-powersgd-rank2", {"output.log_every_steps=2", "output.layer_stats_every_steps=3"});
  const auto off = seededEvents(dir.file("off"));
  EXPECT_GT(off.size(), 10u);
  EXPECT_EQ(off, seededEvents(dir.file("on")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("off/") + outputs::run_files::kLayers));
}

// layers.csv is its own sink's, added by resolve() to whatever output.sinks lists.
TEST(LayersCsv, IsWrittenWhateverOutputSinksSays) {
  TempDir dir;
  train(dir.file("run"), "fashion-sgd", {"output.layer_stats_every_steps=3", "output.sinks=[csv]"});
  std::set<int64_t> steps;
  for (const auto& row : rowsOf(dir.file("run"))) steps.insert(row.step);
  EXPECT_EQ(steps, (std::set<int64_t>{3, 6}));
  EXPECT_FALSE(std::filesystem::exists(dir.file("run/") + outputs::run_files::kMetrics));
}

}  // namespace
}  // namespace gcrun
