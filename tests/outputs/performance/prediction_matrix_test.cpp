// The fastest-method matrix from hand-made prediction rows, its heat map, and where it shows:
// predict.md and a study's report.
#include <gtest/gtest.h>

#include <filesystem>

#include "outputs/files/safe_files.h"
#include "outputs/performance/prediction_matrix.h"
#include "outputs/performance/prediction_output.h"
#include "outputs/performance/report_projection.h"
#include "outputs/report/report.h"
#include "outputs/report/summary.h"
#include "tests/support/command.h"
#include "tests/support/gnuplot.h"
#include "tests/support/step_timelines.h"
#include "tests/support/temp_dir.h"

namespace gcrun::performance {
namespace {

using testing::contains;
using testing::readFile;
using testing::TempDir;

// A row as predictRuns leaves it: the baselines' own rows have a speedup of 1 and no break-even.
PredictionRow rowOf(const std::string& run, int workers, const std::string& network,
                    std::optional<double> vs_exact = {}, std::optional<double> vs_fp16 = {}, double noise = 0,
                    const std::string& comparison = "task.name=fashion-mnist\n") {
  PredictionRow row;
  row.run = run;
  row.dir = "runs/" + run;
  row.comparison = comparison;
  row.workers = workers;
  row.network = network;
  row.predicted.total_ms = vs_exact ? 100 / *vs_exact : 100;
  row.speedup_vs_exact = vs_exact;
  row.speedup_vs_fp16 = vs_fp16;
  if (vs_exact && run != "exact") row.break_even_vs_exact = 1e9;
  if (vs_fp16 && run != "fp16") row.break_even_vs_fp16 = 1e9;
  row.noise = noise;
  return row;
}

// exact, fp16 and two methods at 2 and 16 workers on a slow and a fast network: rank2 wins at 16
// workers on the slow one, fp16 on the fast one, and exact at 2 workers on the fast one.
std::vector<PredictionRow> fourRuns() {
  std::vector<PredictionRow> rows;
  const auto add = [&](const std::string& run, int workers, const std::string& network, double vs_exact) {
    rows.push_back(rowOf(run, workers, network, vs_exact, vs_exact / 1.3));
  };
  for (const int workers : {2, 16}) {
    for (const std::string network : {"100mbit/20us", "10gbit/20us"}) {
      const bool slow = network == "100mbit/20us";
      add("exact", workers, network, 1);
      rows.back().speedup_vs_fp16 = 1 / 1.3;
      add("fp16", workers, network, 1.3);
      rows.back().speedup_vs_fp16 = 1;
      add("powersgd-rank2", workers, network, slow ? (workers == 16 ? 4.5 : 1.9) : (workers == 16 ? 1.1 : 0.8));
      add("topk", workers, network, slow ? 1.5 : 0.5);
    }
  }
  return rows;
}

TEST(PredictionMatrix, NamesTheFastestMethodPerCell) {
  auto rows = fourRuns();
  for (auto& row : rows) {  // at 2 workers on 10gbit exact wins: fp16 is slower there
    if (row.workers == 2 && row.network == "10gbit/20us" && row.run == "fp16") row.speedup_vs_exact = 0.9;
  }
  const auto matrices = predictionMatrices(rows, QualityRule{});
  ASSERT_EQ(matrices.size(), 1u);
  const auto& matrix = matrices[0];
  EXPECT_EQ(matrix.runs, "exact, fp16, powersgd-rank2, topk");
  EXPECT_EQ(matrix.workers, (std::vector<int>{2, 16}));
  EXPECT_EQ(matrix.networks, (std::vector<std::string>{"100mbit/20us", "10gbit/20us"}));
  const auto table = matrixTable(matrix);
  EXPECT_EQ(table.header, (std::vector<std::string>{"workers", "100mbit/20us", "10gbit/20us"}));
  ASSERT_EQ(table.rows.size(), 2u);
  EXPECT_EQ(table.rows[0],
            (std::vector<std::string>{"2", "powersgd-rank2 1.9x (1.46x over fp16)", "exact (next: fp16 0.9x)"}));
  // fp16 fastest: its speedup over itself is no news.
  EXPECT_EQ(table.rows[1], (std::vector<std::string>{"16", "powersgd-rank2 4.5x (3.46x over fp16)", "fp16 1.3x"}));
  EXPECT_EQ(matrix.cells[1][1].verdict, MatrixCell::Verdict::faster);
  EXPECT_FALSE(matrix.cells[1][1].speedup_vs_fp16.has_value());
  EXPECT_EQ(matrix.cells[0][1].verdict, MatrixCell::Verdict::exact);
}

TEST(PredictionMatrix, ASpeedupWithinTheNoiseIsNoDifference) {
  const auto cell = [](double vs_exact, double noise) {
    const std::vector<PredictionRow> rows = {rowOf("exact", 2, "1gbit/20us", 1),
                                             rowOf("rank2", 2, "1gbit/20us", vs_exact, {}, noise)};
    return cellText(predictionMatrices(rows, QualityRule{})[0].cells[0][0]);
  };
  EXPECT_EQ(cell(1.04, 0.05), "no difference");
  EXPECT_EQ(cell(0.96, 0.05), "no difference");
  EXPECT_EQ(cell(1.0, 0), "no difference");  // exactly 1, whatever the noise
  EXPECT_EQ(cell(1.04, 0.03), "rank2 1.04x");
  EXPECT_EQ(cell(0.96, 0.03), "exact (next: rank2 0.96x)");
}

TEST(PredictionMatrix, EachComparisonHasItsOwnMatrix) {
  auto rows = fourRuns();
  const std::string gpt = "task.name=language-model\n";
  rows.push_back(rowOf("gpt-exact", 2, "1gbit/20us", 1, {}, 0, gpt));
  rows.back().break_even_vs_exact.reset();  // the baseline of its comparison
  rows.push_back(rowOf("gpt-rank4", 2, "1gbit/20us", 2.5, {}, 0, gpt));
  const auto matrices = predictionMatrices(rows, QualityRule{});
  ASSERT_EQ(matrices.size(), 2u);
  EXPECT_EQ(matrices[1].runs, "gpt-exact, gpt-rank4");
  EXPECT_EQ(matrices[1].networks, (std::vector<std::string>{"1gbit/20us"}));
  // No fp16 run in the GPT comparison: its cell says nothing about fp16.
  EXPECT_EQ(cellText(matrices[1].cells[0][0]), "gpt-rank4 2.5x");
  const auto heat_maps = matrixHeatMaps(rows, QualityRule{});
  ASSERT_EQ(heat_maps.size(), 2u);
  EXPECT_EQ(heat_maps[0].name, "speedup-matrix");
  EXPECT_EQ(heat_maps[1].name, "speedup-matrix-2");
  const auto md = matrixMarkdown(rows, QualityRule{});
  EXPECT_LT(md.find("Runs exact, fp16"), md.find("Runs gpt-exact, gpt-rank4")) << md;
  EXPECT_EQ(matrixSections(rows, {}).size(), 2u);
}

TEST(PredictionMatrix, WithoutExactTheFastestByTimeIsNamed) {
  std::vector<PredictionRow> rows = {rowOf("fp16", 2, "1gbit/20us", {}, 1), rowOf("rank2", 2, "1gbit/20us")};
  rows[0].predicted.total_ms = 80;
  rows[1].predicted.total_ms = 60;
  rows[1].speedup_vs_fp16 = 80.0 / 60;
  rows[1].break_even_vs_fp16 = 1e9;
  const auto matrix = predictionMatrices(rows, QualityRule{})[0];
  EXPECT_EQ(cellText(matrix.cells[0][0]), "rank2 1.33x over fp16 (no exact run)");
  const auto heat_map = matrixHeatMap(matrix, "m");
  ASSERT_EQ(heat_map.cells.size(), 1u);
  EXPECT_FALSE(heat_map.cells[0].value.has_value());  // no colour without exact
}

TEST(PredictionMatrix, HeatMapCellsAreTheBestSpeedupsLabelledByMethod) {
  const auto matrix = predictionMatrices(fourRuns(), QualityRule{})[0];
  const auto plot = matrixHeatMap(matrix, "speedup-matrix");
  EXPECT_EQ(plot.x_tics, (std::vector<std::string>{"100mbit/20us", "10gbit/20us"}));
  EXPECT_EQ(plot.y_tics, (std::vector<std::string>{"2", "16"}));
  ASSERT_EQ(plot.cells.size(), 4u);
  const auto& slow16 = plot.cells[2];  // row 16 workers, column 100mbit
  EXPECT_EQ(slow16.x, 1);
  EXPECT_EQ(slow16.y, 2);
  EXPECT_DOUBLE_EQ(*slow16.value, 4.5);
  EXPECT_EQ(slow16.label, (std::vector<std::string>{"powersgd-rank2", "4.5x (3.46x over fp16)"}));
  EXPECT_EQ(outputs::plotData(plot), "# x y value\n1 1 1.8999999999999999\n2 1 1.3\n1 2 4.5\n2 2 1.3\n");
}

TEST(PredictionMatrix, NamesFromRunsAreEscapedInMarkdownAndHtml) {
  const std::vector<PredictionRow> rows = {rowOf("exact", 2, "1gbit/20us", 1),
                                           rowOf("<b>x|[y]</b>", 2, "1gbit/20us", 3)};
  const auto md = outputs::markdownTable(matrixTable(predictionMatrices(rows, QualityRule{})[0]));
  EXPECT_TRUE(contains(md, "&lt;b&gt;x\\|\\[y\\]&lt;/b&gt; 3x")) << md;
  EXPECT_FALSE(contains(md, "<b>")) << md;
  TempDir dir;
  outputs::ReportOptions options{dir.file("report"), {"html"}, "escaping"};
  options.sections = matrixSections(rows, {});
  outputs::writeReport({}, options);
  const auto page = readFile(dir.file("report/report.html"));
  EXPECT_TRUE(contains(page, "&lt;b&gt;x|[y]&lt;/b&gt; 3x")) << page;
  EXPECT_FALSE(contains(page, "<b>x")) << page;
}

// A run's name reaches gnuplot as a string literal: quotes, backquotes and macros stay text.
TEST(PredictionMatrix, HeatMapLabelsReachGnuplotAsText) {
  GCRUN_SKIP_WITHOUT_GNUPLOT();
  TempDir dir;
  const auto mark = dir.file("mark");
  const std::string name = "x' ; system('touch " + mark + "1') ; '`touch " + mark + "2`@m";
  const std::vector<PredictionRow> rows = {rowOf("exact", 2, "1gbit/20us", 1), rowOf(name, 2, "1gbit/20us", 2)};
  const auto rendered =
      outputs::renderPlots(matrixHeatMaps(rows, QualityRule{}), files::Directory::open(dir.file("plots"), true));
  EXPECT_TRUE(rendered.note.empty()) << rendered.note << readFile(dir.file("plots/gnuplot.log"));
  EXPECT_FALSE(std::filesystem::exists(mark + "1"));
  EXPECT_FALSE(std::filesystem::exists(mark + "2"));
  ASSERT_EQ(rendered.svg.count("speedup-matrix"), 1u);
  EXPECT_TRUE(contains(rendered.svg.at("speedup-matrix"), "touch")) << "the label is drawn as it is";
}

using testing::blockingRun;

outputs::RunData runOf(const std::string& name, const std::string& reducer) {
  outputs::RunData run;
  run.dir = "runs/" + name + "-seed1";
  run.name = name;
  run.world_size = 2;
  run.status = outputs::RunStatus::completed;
  run.settings = {{"reducer.name", reducer}, {"task.name", "fashion-mnist"}, {"training.batch_size", "64"}};
  run.baseline = reducer == "exact" ? Baseline::full_precision : Baseline::none;
  run.metric = "test.accuracy";
  run.epochs = {{100, 1, 0.5, 0, 10}, {200, 2, 0.8, 0, 21}};
  return run;
}

class MatrixFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    runs_ = {runOf("exact", "exact"), runOf("powersgd", "powersgd")};
    timelines_ = {blockingRun(100, 0, 1e8), blockingRun(100, 20, 1e6)};
    options_.networks = {network::linkProfile(1.25e7, 2e-5), network::linkProfile(1.25e10, 2e-5)};
    options_.workers = {2, 16};
    rows_ = predictRuns(runs_, timelines_, options_);
  }
  TempDir dir_;
  std::vector<outputs::RunData> runs_;
  std::vector<RunTimeline> timelines_;
  PredictOptions options_;
  std::vector<PredictionRow> rows_;
};

TEST_F(MatrixFiles, PredictMdOpensWithTheMatrix) {
  writePrediction(runs_, timelines_, rows_, options_, dir_.file("out"));
  const auto md = readFile(dir_.file("out/predict.md"));
  const std::string top = "# gcrun predict\n\nFastest method by worker count";
  EXPECT_EQ(md.rfind(top, 0), 0u) << md;
  const auto matrix = md.find("| workers | 100mbit/20us | 100gbit/20us |");
  ASSERT_NE(matrix, std::string::npos) << md;
  EXPECT_LT(matrix, md.find("| run | reducer |")) << md;
  // 100 Mbit/s: exact's 8 s all-reduce against PowerSGD's 20 ms encode and 80 ms send.
  EXPECT_TRUE(contains(md, "| 16 | powersgd-seed1 ")) << md;
  EXPECT_TRUE(std::filesystem::is_regular_file(dir_.path() / "out/plots/speedup-matrix.dat"));
  if (!testing::gnuplotInstalled()) GTEST_SKIP() << "gnuplot is not installed: the heat map is not drawn";
  EXPECT_TRUE(std::filesystem::is_regular_file(dir_.path() / "out/plots/speedup-matrix.png"));
  EXPECT_TRUE(contains(readFile(dir_.file("out/plots/speedup-matrix.svg")), "powersgd-seed1"));
  EXPECT_TRUE(contains(md, "](plots/speedup-matrix.png)")) << md;
}

TEST_F(MatrixFiles, AStudyReportOpensWithTheMatrixAndFoldsTheFullTable) {
  outputs::ReportOptions options{dir_.file("study"), outputs::reportFormats(), "a study"};
  options.sections = matrixSections(rows_, {});
  auto table = predictionSection(rows_, options_);
  table.link = "predict/predict.csv";
  options.sections.push_back(table);
  outputs::writeReport(runs_, options);
  const auto page = readFile(dir_.file("study/report.html"));
  const auto matrix = page.find("<th>workers</th><th>100mbit/20us</th>");
  ASSERT_NE(matrix, std::string::npos) << page;
  EXPECT_LT(matrix, page.find("<th>configuration</th>")) << page;
  const auto details = page.find("<details>");
  ASSERT_NE(details, std::string::npos) << page;
  const auto full = page.find("<th>run</th><th>reducer</th>");
  EXPECT_LT(details, full);
  EXPECT_LT(full, page.find("</details>"));
  EXPECT_TRUE(contains(page, "<summary><h2>Does compression pay? Predicted time per batch</h2> (8 rows)</summary>"))
      << page;
  EXPECT_TRUE(contains(page, "<a href=\"predict/predict.csv\">")) << page;
  EXPECT_TRUE(contains(page, "<div class=\"wide\"><table>")) << page;
  const auto md = readFile(dir_.file("study/report.md"));
  EXPECT_LT(md.find("| workers | 100mbit/20us |"), md.find("| configuration |")) << md;
  EXPECT_TRUE(contains(md, "## Does compression pay? Predicted time per batch")) << md;
  EXPECT_TRUE(contains(md, "[predict/predict.csv](predict/predict.csv)")) << md;
  EXPECT_FALSE(contains(md, "<details>")) << md;
  EXPECT_TRUE(std::filesystem::is_regular_file(dir_.path() / "study/plots/speedup-matrix.dat"));
  if (!testing::gnuplotInstalled()) GTEST_SKIP() << "gnuplot is not installed: the heat map is not drawn";
  for (const char* extension : {".png", ".svg"}) {
    EXPECT_TRUE(
        std::filesystem::is_regular_file(dir_.path() / ("study/plots/speedup-matrix" + std::string(extension))));
  }
  const auto heat_map = page.find("<svg", matrix);
  EXPECT_LT(heat_map, page.find("<th>configuration</th>")) << "the heat map comes with the matrix";
  EXPECT_TRUE(contains(md, "](plots/speedup-matrix.png)")) << md;
}

}  // namespace
}  // namespace gcrun::performance
