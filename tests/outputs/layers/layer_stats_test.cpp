// layers.csv (output.layer_stats_every_steps) written, read back, and shown by gcrun report: its
// plot of compression error by layer and its table of bytes by layer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <spdlog/fmt/fmt.h>

#include "hyperparams/base/errors.h"
#include "outputs/layers/layer_stats.h"
#include "outputs/report/layer_report.h"
#include "outputs/report/report.h"
#include "outputs/run_directory.h"
#include "tests/support/command.h"
#include "tests/support/gnuplot.h"
#include "tests/support/temp_dir.h"

namespace gcrun::outputs {
namespace {

using testing::contains;
using testing::readFile;
using testing::TempDir;

LayerStatsRow row(int64_t step, std::string name, std::vector<int64_t> shape, uint64_t bits, double error,
                  std::optional<int64_t> rank) {
  int64_t elements = 1;
  for (int64_t size : shape) elements *= size;
  return {step, std::move(name), std::move(shape), elements, bits, 0.5, error, rank};
}

TEST(LayerStats, RowsReadBackAsWritten) {
  const auto written = row(50, "conv1.weight", {32, 1, 5, 5}, 3712, 0.25, 2);
  EXPECT_EQ(formatLayerStatsRow(written), "50,conv1.weight,32x1x5x5,800,3712,0.5,0.25,2");
  const auto read = parseLayerStatsRow(formatLayerStatsRow(written));
  ASSERT_TRUE(read);
  EXPECT_EQ(read->parameter, "conv1.weight");
  EXPECT_EQ(read->shape, (std::vector<int64_t>{32, 1, 5, 5}));
  EXPECT_EQ(read->elements, 800);
  EXPECT_EQ(read->bits, 3712u);
  EXPECT_EQ(read->rel_compression_error, 0.25);
  EXPECT_EQ(read->rank, 2);
  // Unknown values are empty cells; a scalar has a shape of its own.
  const LayerStatsRow bare{7, "scale", {}, 1, std::nullopt, 0.0, std::nullopt, std::nullopt};
  EXPECT_EQ(formatLayerStatsRow(bare), "7,scale,scalar,1,,0,,");
  const auto back = parseLayerStatsRow(formatLayerStatsRow(bare));
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->shape.empty());
  EXPECT_FALSE(back->bits || back->rel_compression_error || back->rank);
  // A name with commas, quotes and a newline stays one field on one line.
  const auto odd = row(1, "a,\"b\"\nc", {2}, 64, 0, std::nullopt);
  const auto line = formatLayerStatsRow(odd);
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  ASSERT_TRUE(parseLayerStatsRow(line));
  EXPECT_EQ(parseLayerStatsRow(line)->parameter, "a,\"b\"\\nc");
  // A name a spreadsheet would run as a formula is guarded, and read back as it was.
  const auto formula = row(1, "=HYPERLINK(\"x\")", {2}, 64, -0.5, std::nullopt);
  const auto guarded = formatLayerStatsRow(formula);
  EXPECT_EQ(guarded.rfind("1,\"'=HYPERLINK(\"\"x\"\")\",2,", 0), 0u) << guarded;
  EXPECT_NE(guarded.find(",-0.5,"), std::string::npos) << "numbers stay numbers: " << guarded;
  ASSERT_TRUE(parseLayerStatsRow(guarded));
  EXPECT_EQ(parseLayerStatsRow(guarded)->parameter, "=HYPERLINK(\"x\")");
  // Lines that are no whole row: cut short, or other columns.
  for (const char* bad : {"50,conv1.weight,32x1x5x5,800,3712", "50,w,2x,2,64,0.5,,", "x,w,2,2,64,0.5,,",
                          "1,\"w,2,2,64,0.5,,", "1,w,2,2,-64,0.5,,", "1,w,2,2,64,nan,,"}) {
    EXPECT_FALSE(parseLayerStatsRow(bad)) << bad;
  }
}

// A run's layers.csv: two layers sampled at two steps (3 for the first, whose last line a crash cut short).
void writeLayers(const std::string& dir, double error_scale) {
  std::filesystem::create_directories(dir);
  LayerStatsFile file(dir, /*append=*/false);
  for (int64_t step : {10, 20}) {
    file.layerStats({row(step, "fc.weight", {100, 10}, step == 10 ? 8800 : 9000, 0.2 * error_scale, 4),
                     row(step, "fc.bias", {100}, 3200, 0.0, std::nullopt)});
  }
  std::ofstream(dir + "/" + run_files::kLayers, std::ios::app) << "30,fc.weight,100x10,1000,88";
}

TEST(LayerStats, SummariesAreMeansOverTheSampledSteps) {
  TempDir dir;
  writeLayers(dir.file("run"), 1.0);
  const auto layers = readLayerSummaries(dir.file("run") + "/" + run_files::kLayers);
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_EQ(layers[0].parameter, "fc.weight");
  EXPECT_EQ(layers[0].shape, "100x10");
  EXPECT_EQ(layers[0].samples, 2u);
  EXPECT_DOUBLE_EQ(*layers[0].mean_bits, 8900);
  EXPECT_DOUBLE_EQ(*layers[0].mean_compression_error, 0.2);
  EXPECT_EQ(layers[0].rank, 4);
  EXPECT_FALSE(layers[1].rank);
  // Appending (a resumed run) keeps the one header.
  LayerStatsFile(dir.file("run"), /*append=*/true).layerStats({row(40, "fc.bias", {100}, 3200, 0.0, std::nullopt)});
  EXPECT_EQ(readLayerSummaries(dir.file("run") + "/" + run_files::kLayers)[1].samples, 3u);
  // Someone else's CSV is refused, naming it.
  std::ofstream(dir.file("other.csv")) << "a,b\n1,2\n";
  try {
    readLayerSummaries(dir.file("other.csv"));
    FAIL() << "read another file as layers.csv";
  } catch (const UserError& e) {
    EXPECT_TRUE(contains(e.what(), "other.csv") && contains(e.what(), "not a gcrun layers.csv")) << e.what();
  }
}

// Two configurations of two seeds each, as a study leaves them.
void writeRunWithLayers(const std::string& dir, const std::string& reducer, int seed, double error_scale) {
  writeLayers(dir, error_scale);
  std::ofstream(dir + "/config.yaml") << "seed: " << seed << "\nreducer:\n  name: " << reducer << "\n";
  std::ofstream(dir + "/run.json") << "{\"experiment\": \"fashion-sgd\", \"world_size\": 2, \"num_parameters\": 1100, "
                                      "\"steps\": 20, \"epochs_done\": 1, \"bits_sent\": 245000, "
                                      "\"status\": \"completed\", \"final_metrics\": {\"test.accuracy\": 0.8}}\n";
}

TEST(LayerReport, PlotsTheErrorByLayerAndTablesTheBytes) {
  TempDir dir;
  for (int seed : {1, 2}) {
    writeRunWithLayers(dir.file(fmt::format("runs/a-seed{}", seed)), "powersgd", seed, seed);
    writeRunWithLayers(dir.file(fmt::format("runs/b-seed{}", seed)), "topk", seed, 2);
  }
  const auto runs = loadRuns({dir.file("runs")}).runs;
  const auto groups = groupRuns(runs);
  ASSERT_EQ(groups.size(), 2u);
  const auto plot = layerErrorPlot(groups);
  ASSERT_TRUE(plot);
  EXPECT_EQ(plot->x_tics, (std::vector<std::string>{"fc.weight", "fc.bias"}));
  ASSERT_EQ(plot->curves.size(), 2u);
  // Configuration a: fc.weight's error 0.2 and 0.4 over its seeds, at x = 1.
  const auto& weight = plot->curves[0].points[0];
  EXPECT_DOUBLE_EQ(weight[0], 1);
  EXPECT_NEAR(weight[1], 0.3, 1e-12);
  EXPECT_NEAR(weight[2], 0.2, 1e-12);
  EXPECT_NEAR(weight[3], 0.4, 1e-12);
  const auto section = layerBytesSection(groups);
  ASSERT_TRUE(section);
  // fc.weight carries 8900 of 12100 bits a step (73.6%), then fc.bias takes it past 90%.
  ASSERT_EQ(section->table.rows.size(), 4u);
  EXPECT_EQ(section->table.rows[0][1], "fc.weight");
  EXPECT_EQ(section->table.rows[0][5], "73.6%");
  EXPECT_EQ(section->table.rows[0][7], "4");
  EXPECT_EQ(section->table.rows[1][1], "fc.bias");
  EXPECT_EQ(section->table.rows[1][7], "—");

  ReportOptions options;
  options.output_dir = dir.file("report");
  writeReport(runs, options);
  const auto markdown = readFile(dir.file("report/report.md"));
  EXPECT_TRUE(contains(markdown, "## Bytes by layer")) << markdown;
  EXPECT_TRUE(contains(markdown, "| a | fc.weight | 100x10 | 1000 |")) << markdown;
  EXPECT_TRUE(std::filesystem::exists(dir.file("report/plots/compression-error-by-layer.dat")));
}

TEST(LayerReport, LayerNamesReachGnuplotOnlyAsStrings) {
  GCRUN_SKIP_WITHOUT_GNUPLOT();
  TempDir dir;
  const std::string run = dir.file("runs/a-seed1");
  writeRunWithLayers(run, "powersgd", 1, 1);
  const std::string hostile = "w'; system('touch " + dir.file("pwned") + "'); print '";
  LayerStatsFile(run, /*append=*/false)
      .layerStats({row(10, "fc.weight", {100, 10}, 8800, 0.2, 4), row(10, hostile, {4}, 128, 0.5, std::nullopt)});
  ReportOptions options;
  options.output_dir = dir.file("report");
  writeReport(loadRuns({dir.file("runs")}).runs, options);
  EXPECT_TRUE(std::filesystem::exists(dir.file("report/plots/compression-error-by-layer.svg")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("pwned")));
  EXPECT_TRUE(contains(readFile(dir.file("report/plots/compression-error-by-layer.gp")), "'w''; system(''touch"));
}

TEST(LayerReport, NothingWithoutLayerFiles) {
  TempDir dir;
  writeRunWithLayers(dir.file("runs/a-seed1"), "exact", 1, 1);
  std::filesystem::remove(dir.file("runs/a-seed1/") + run_files::kLayers);
  const auto runs = loadRuns({dir.file("runs")}).runs;
  const auto groups = groupRuns(runs);
  EXPECT_FALSE(layerErrorPlot(groups));
  EXPECT_FALSE(layerBytesSection(groups));
}

}  // namespace
}  // namespace gcrun::outputs
