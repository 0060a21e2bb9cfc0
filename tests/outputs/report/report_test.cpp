// gcrun report on run directories written by hand: grouping by seed, the statistics, the paper
// column, the tables and the data each plot is drawn from.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include <spdlog/fmt/fmt.h>

#include "hyperparams/base/errors.h"
#include "outputs/csv_field.h"
#include "outputs/report/plots.h"
#include "outputs/report/report.h"
#include "outputs/report/safe_text.h"
#include "outputs/report/summary.h"
#include "tests/support/command.h"
#include "tests/support/gnuplot.h"
#include "tests/support/temp_dir.h"

namespace gcrun::outputs {
namespace {

using testing::contains;
using testing::readFile;
using testing::TempDir;

// A finished run as gcrun leaves it: accuracy `final` after two epochs, 2 MiB sent per epoch.
void writeRun(const std::string& dir, const std::string& reducer, int seed, double final, const std::string& status,
              bool paper = false) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.yaml") << "# experiment: fashion-sgd\nseed: " << seed
                                      << "\ntask:\n  name: fashion-mnist\nreducer:\n  name: " << reducer
                                      << "\n  rank: 2\n"
                                      << (paper ? "paper:\n  metric: test.accuracy\n  value: 0.9\n  source: Table 3\n"
                                                : "");
  std::ofstream(dir + "/run.json") << fmt::format(
      "{{\"experiment\": \"fashion-sgd\", \"world_size\": 2, \"num_parameters\": 1000, \"steps\": 20, "
      "\"epochs_done\": 2, \"bits_sent\": {}, \"status\": \"{}\", \"error\": \"{}\", "
      "\"final_metrics\": {{\"test.accuracy\": {}}}}}\n",
      2 * 2 * 8 * (1 << 20), status, status == "failed" ? "step 3: the loss is nan" : "", final);
  std::ofstream(dir + "/timer_summary.json") << "{\"batch\": {\"median_duration\": 0.05}}\n";
  std::ofstream metrics(dir + "/metrics.jsonl");
  for (int epoch = 1; epoch <= 2; ++epoch) {
    for (int step = 10 * (epoch - 1) + 5; step <= 10 * epoch; step += 5) {
      metrics << fmt::format(
          "{{\"name\": \"cross_entropy\", \"value\": {}, \"split\": \"train\", \"epoch\": 0.5, "
          "\"step\": {}, \"bits\": 0, \"window\": 5}}\n",
          2.0 / step, step);
    }
    const int step = 10 * epoch;
    const double accuracy = epoch == 2 ? final : final - 0.1;
    metrics << fmt::format(
        "{{\"name\": \"accuracy\", \"value\": {}, \"split\": \"test\", \"epoch\": {}, \"step\": {}, "
        "\"bits\": {}}}\n",
        accuracy, epoch, step, epoch * 8 * (1 << 21));
    metrics << fmt::format(
        "{{\"name\": \"elapsed_s\", \"value\": {}, \"split\": \"train\", \"epoch\": {}, "
        "\"step\": {}, \"bits\": {}}}\n",
        3.0 * epoch, epoch, step, epoch * 8 * (1 << 21));
  }
}

std::vector<RunData> load(const TempDir& dir) { return loadRuns({dir.path().string()}).runs; }

TEST(Report, GroupsSeedsAndComputesTheirSpread) {
  TempDir dir;
  const std::vector<double> exact = {0.80, 0.82, 0.87};
  for (int seed = 1; seed <= 3; ++seed) {
    writeRun(dir.file(fmt::format("runs/sgd-seed{}", seed)), "exact", seed, exact[seed - 1], "completed");
    writeRun(dir.file(fmt::format("runs/rank2-seed{}", seed)), "powersgd", seed, 0.85, "completed", true);
  }
  writeRun(dir.file("runs/rank2-seed4"), "powersgd", 4, 0.1, "failed", true);
  const auto runs = load(dir);
  ASSERT_EQ(runs.size(), 7u);
  const auto groups = groupRuns(runs);
  ASSERT_EQ(groups.size(), 2u);
  const auto& rank2 = groups[0].name == "rank2" ? groups[0] : groups[1];
  const auto& sgd = groups[0].name == "sgd" ? groups[0] : groups[1];
  EXPECT_EQ(sgd.runs.size(), 3u);
  EXPECT_EQ(sgd.final_metric.count, 3u);
  EXPECT_NEAR(sgd.final_metric.mean, (0.80 + 0.82 + 0.87) / 3, 1e-12);
  // Sample standard deviation: sqrt(sum (x - mean)^2 / (n - 1)).
  const double mean = sgd.final_metric.mean;
  const double variance = (std::pow(0.80 - mean, 2) + std::pow(0.82 - mean, 2) + std::pow(0.87 - mean, 2)) / 2;
  EXPECT_NEAR(sgd.final_metric.std, std::sqrt(variance), 1e-12);
  EXPECT_DOUBLE_EQ(sgd.final_metric.min, 0.80);
  EXPECT_DOUBLE_EQ(sgd.final_metric.max, 0.87);
  // The failed seed counts in the status, not in the statistics.
  EXPECT_EQ(rank2.runs.size(), 4u);
  EXPECT_EQ(rank2.final_metric.count, 3u);
  EXPECT_EQ(rank2.status, "3 completed, 1 failed");
  EXPECT_NEAR(rank2.final_metric.std, 0.0, 1e-12);
  ASSERT_TRUE(rank2.paper_value.has_value());
  EXPECT_DOUBLE_EQ(*rank2.paper_value, 0.9);
  EXPECT_DOUBLE_EQ(sgd.mib_per_epoch, 2.0);
  EXPECT_DOUBLE_EQ(sgd.compression, 32.0 * 1000 * 20 / (2 * 2 * 8 * (1 << 20)));
  EXPECT_DOUBLE_EQ(*sgd.time_per_batch_ms, 50.0);
  EXPECT_EQ(sgd.settings, "reducer.name=exact");

  const auto table = markdownTable(resultTable(groups));
  EXPECT_TRUE(contains(table, "test.accuracy 85.00% ± 0.00% (85.00%–85.00%)")) << table;
  EXPECT_TRUE(contains(table, "-5.00 points")) << table;  // 0.85 - 0.9
  EXPECT_TRUE(contains(table, "3 (3 completed, 1 failed)")) << table;
  const auto csv = csvTable(groups);
  EXPECT_TRUE(contains(
      csv,
      "rank2,powersgd,reducer.name=powersgd,2,1,3,\"3 completed, 1 failed\",test.accuracy,0.85,0,0.85,0.85,50,,2,"))
      << csv;
  EXPECT_TRUE(contains(csv, ",0.9,-0.05") || contains(csv, ",0.9,-0.0500000")) << csv;
}

// A run of `reducer` whose reducer section holds `rank` and a setting of its own that every run of
// that reducer has alike.
void writeRunOf(const std::string& dir, const std::string& reducer, const std::string& rank) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.yaml") << "seed: 1\nreducer:\n  name: " << reducer << "\n"
                                      << (rank.empty() ? "" : "  rank: " + rank + "\n  n_power_iterations: 0\n");
  std::ofstream(dir + "/run.json") << "{\"status\": \"completed\"}\n";
}

// The settings cell: a key two configurations both have with different values; not a reducer
// setting that only that reducer's rows have, alike.
TEST(Report, SettingsShowWhatTellsConfigurationsApart) {
  TempDir dir;
  writeRunOf(dir.file("runs/exact"), "exact", "");
  writeRunOf(dir.file("runs/rank2"), "powersgd", "2");
  writeRunOf(dir.file("runs/rank4"), "powersgd", "4");
  const auto runs = load(dir);
  const auto groups = groupRuns(runs);
  ASSERT_EQ(groups.size(), 3u);
  std::map<std::string, std::string> settings;
  for (const auto& g : groups) settings[g.name] = g.settings;
  EXPECT_EQ(settings, (std::map<std::string, std::string>{{"exact", "reducer.name=exact"},
                                                          {"rank2", "reducer.name=powersgd reducer.rank=2"},
                                                          {"rank4", "reducer.name=powersgd reducer.rank=4"}}));
}

TEST(Report, PlotsAreDrawnFromOneCurvePerConfiguration) {
  TempDir dir;
  for (int seed = 1; seed <= 2; ++seed) {
    writeRun(dir.file(fmt::format("runs/a-seed{}", seed)), "exact", seed, 0.8 + 0.02 * seed, "completed");
    writeRun(dir.file(fmt::format("runs/b-seed{}", seed)), "topk", seed, 0.7, "completed");
  }
  const auto runs = load(dir);  // the groups point into it
  const auto groups = groupRuns(runs);
  const auto plots = reportPlots(groups);
  ASSERT_EQ(plots.size(), 5u);
  for (const auto& plot : plots) {
    ASSERT_EQ(plot.curves.size(), 2u) << plot.name;
    const auto data = plotData(plot);
    // Two blocks for gnuplot's `index`, each headed by its configuration.
    EXPECT_TRUE(contains(data, "# a\n") && contains(data, "# b\n")) << data;
    EXPECT_TRUE(contains(data, "\n\n\n# b")) << data;
  }
  const auto& by_epoch = plots[0];
  EXPECT_EQ(by_epoch.name, "metric-vs-epoch");
  ASSERT_EQ(by_epoch.curves[0].points.size(), 2u);
  // Epoch 2 of configuration a: mean of 0.82 and 0.84, band 0.82-0.84.
  const auto& last = by_epoch.curves[0].points[1];
  EXPECT_DOUBLE_EQ(last[0], 2.0);
  EXPECT_NEAR(last[1], 0.83, 1e-12);
  EXPECT_NEAR(last[2], 0.82, 1e-12);
  EXPECT_NEAR(last[3], 0.84, 1e-12);
  EXPECT_EQ(plots[1].name, "metric-vs-step");
  EXPECT_DOUBLE_EQ(plots[1].curves[0].points[1][0], 20.0);  // epoch 2 ends at step 20
  EXPECT_DOUBLE_EQ(plots[2].curves[0].points[1][0], 4.0);   // MiB by epoch 2
  EXPECT_DOUBLE_EQ(plots[3].curves[0].points[1][0], 6.0);   // seconds by epoch 2
  EXPECT_EQ(plots[4].curves[0].points.size(), 4u);          // losses at steps 5, 10, 15, 20
}

TEST(Report, WritesTablesImagesAndOneSelfContainedPage) {
  GCRUN_SKIP_WITHOUT_GNUPLOT();
  TempDir dir;
  for (int seed = 1; seed <= 2; ++seed) {
    writeRun(dir.file(fmt::format("runs/a-seed{}", seed)), "exact", seed, 0.8, "completed");
    writeRun(dir.file(fmt::format("runs/b-seed{}", seed)), "topk", seed, 0.7, seed == 1 ? "completed" : "running");
  }
  const auto result = writeReport(load(dir), {dir.file("report"), reportFormats(), "A test study"});
  ASSERT_TRUE(result.note.empty()) << result.note;
  EXPECT_EQ(result.configurations, 2u);
  const auto md = readFile(dir.file("report/report.md"));
  EXPECT_TRUE(contains(md, "A test study")) << md;
  EXPECT_TRUE(contains(md, "## Runs not completed")) << md;
  EXPECT_TRUE(contains(md, "b-seed2: running")) << md;
  for (const char* plot : {"metric-vs-epoch", "metric-vs-step", "metric-vs-data", "metric-vs-time", "loss-vs-step"}) {
    const auto png = readFile(dir.file(std::string("report/plots/") + plot + ".png"));
    ASSERT_GT(png.size(), 8u) << plot;
    EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << plot;
    const auto svg = readFile(dir.file(std::string("report/plots/") + plot + ".svg"));
    EXPECT_TRUE(contains(svg, "<svg") && contains(svg, "</svg>")) << plot;
    EXPECT_TRUE(contains(md, std::string("plots/") + plot + ".png")) << md;
  }
  const auto page = readFile(dir.file("report/report.html"));
  EXPECT_TRUE(contains(page, "<table>") && contains(page, "<svg")) << "no table or inline plot";
  EXPECT_FALSE(contains(page, "http://") && contains(page, "<script src")) << "the page loads nothing";
  EXPECT_FALSE(contains(page, "src=\"")) << "no external images";
  EXPECT_TRUE(contains(readFile(dir.file("report/report.csv")), "configuration,reducer,settings"));
}

// A section may open the report (the answer first), or fold in report.html (a long table) while
// staying a plain section in report.md; every table scrolls in its own box, never the page.
TEST(Report, SectionsLeadOrFoldAndTablesScrollInTheirOwnBox) {
  TempDir dir;
  writeRun(dir.file("runs/a-seed1"), "exact", 1, 0.8, "completed");
  ReportOptions options{dir.file("report"), reportFormats(), "A study"};
  const std::string long_name(40, 'n');
  options.sections = {{"First", "the answer", {{"answer"}, {{"42"}}}, {}, true},
                      {"Full", "every row", {{"row"}, {{long_name}}}, {}, false, true, "predict/predict.csv"}};
  writeReport(load(dir), options);
  const auto page = readFile(dir.file("report/report.html"));
  const auto first = page.find("<h2>First</h2>");
  ASSERT_NE(first, std::string::npos) << page;
  EXPECT_LT(first, page.find("<h2>Results by configuration</h2>")) << page;
  EXPECT_LT(page.find("<h2>Results by configuration</h2>"), page.find("<th>configuration</th>")) << page;
  EXPECT_LT(page.find("<th>configuration</th>"), page.find("<details>")) << page;
  EXPECT_TRUE(contains(page,
                       "<details>\n<summary><h2>Full</h2> (1 rows)</summary>\n<p>every row</p>\n"
                       "<p><a href=\"predict/predict.csv\">predict/predict.csv</a></p>\n"
                       "<div class=\"wide\"><table>"))
      << page;
  EXPECT_TRUE(contains(page, "<td><div class=\"long\">" + long_name + "</div></td>")) << page;
  EXPECT_TRUE(contains(page, ".wide{overflow-x:auto")) << page;
  const auto md = readFile(dir.file("report/report.md"));
  EXPECT_EQ(md.rfind("# gcrun report\n\nA study\n\n## First\n\nthe answer\n\n| answer |", 0), 0u) << md;
  EXPECT_TRUE(contains(md, "\n## Full\n\nevery row\n\n[predict/predict.csv](predict/predict.csv)\n\n| row |")) << md;
  EXPECT_FALSE(contains(md, "<details>")) << md;
}

// The baselines are what run.json says (ReducerSpec::baseline), whatever the reducer's name; a
// run.json without the key, as gcrun wrote before, falls back on the built-in baselines' names.
TEST(Report, BaselinesAreWhatRunJsonRecords) {
  TempDir dir;
  writeRun(dir.file("runs/old-exact-seed1"), "exact", 1, 0.9, "completed");
  writeRun(dir.file("runs/mine-seed1"), "my-exact", 1, 0.9, "completed");
  writeRun(dir.file("runs/renamed-seed1"), "exact", 1, 0.9, "completed");
  const auto recorded = [&](const std::string& run, const std::string& baseline) {
    auto text = readFile(dir.file("runs/" + run + "/run.json"));
    text.insert(text.find('{') + 1, "\"baseline\": \"" + baseline + "\", ");
    std::ofstream(dir.file("runs/" + run + "/run.json")) << text;
  };
  recorded("mine-seed1", "full-precision");
  recorded("renamed-seed1", "none");
  std::map<std::string, Baseline> baselines;
  for (const auto& run : load(dir)) baselines[run.name] = run.baseline;
  EXPECT_EQ(baselines.at("old-exact"), Baseline::full_precision);
  EXPECT_EQ(baselines.at("mine"), Baseline::full_precision);
  EXPECT_EQ(baselines.at("renamed"), Baseline::none);
}

TEST(Report, UnknownFormatAndMissingDirectoryAreUserErrors) {
  TempDir dir;
  EXPECT_THROW(writeReport({}, {dir.file("r"), {"pdf"}, ""}), UserError);
  EXPECT_THROW(loadRuns({dir.file("nonexistent")}), UserError);
}

// A study writes its report before any run has started: no runs is a report, not an error.
TEST(Report, NoRunsYetIsAnEmptyReport) {
  TempDir dir;
  const auto result = writeReport({}, {dir.file("study"), reportFormats(), "A study"});
  EXPECT_EQ(result.runs, 0u);
  EXPECT_TRUE(contains(readFile(dir.file("study/report.md")), "0 runs in 0 configurations"));
}

TEST(Report, TextFromRunsStaysTextInEachFormat) {
  EXPECT_EQ(gnuplotString("it's `id`\n@m"), "'it''s `id`\\n@m'");
  EXPECT_EQ(oneLine("a\r\nb\x1b[2J\xc2\x85\xff"), "a\\r\\nb\\x1b[2J\\u0085\\xff");
  EXPECT_EQ(validUtf8("ok\xff\xc0\xaf\xed\xa0\x80é"), "ok\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFDé");
  EXPECT_EQ(markdownText("<b>|[x]#\n"), "&lt;b&gt;\\|\\[x\\]\\#\\\\n");
  EXPECT_EQ(csvField("=1+1"), "\"'=1+1\"");
  EXPECT_EQ(csvField("-x"), "\"'-x\"");
  EXPECT_EQ(csvField("a\rb"), "\"'a\rb\"");
  EXPECT_EQ(csvField("a,b"), "\"a,b\"");
  EXPECT_EQ(csvField("plain"), "plain");
  EXPECT_EQ(csvField("bad\xff"), "bad\uFFFD");
  EXPECT_EQ(csvFieldText("'=1+1"), "=1+1");
  EXPECT_EQ(csvFieldText("'plain"), "'plain");
}

}  // namespace
}  // namespace gcrun::outputs

namespace gcrun::outputs {
namespace {

ConfigGroup groupOf(const std::string& name, const std::string& reducer, double accuracy, double mib) {
  ConfigGroup g;
  g.name = name;
  g.reducer = reducer;
  g.baseline = reducer == "exact" ? Baseline::full_precision : Baseline::none;
  g.metric = "test.accuracy";
  g.final_metric = spreadOf({accuracy});
  g.mib_per_epoch = mib;
  return g;
}

TEST(Report, OpensWithTheCheapestConfigurationWithinAPointOfExact) {
  std::vector<ConfigGroup> groups = {groupOf("sgd", "exact", 0.90, 100), groupOf("rank1", "powersgd", 0.88, 1),
                                     groupOf("rank2", "powersgd", 0.895, 2), groupOf("rank4", "powersgd", 0.899, 4)};
  EXPECT_EQ(findingLine(groups), "rank2 is within 0.5 points of sgd (test.accuracy) at 1/50 of the data.");
  groups.erase(groups.begin() + 2, groups.end());
  EXPECT_EQ(findingLine(groups), "rank1 is 2.0 points behind sgd (test.accuracy) at 1/100 of the data.");
  groups.erase(groups.begin());
  EXPECT_EQ(findingLine(groups), "");  // nothing to compare with
}

}  // namespace
}  // namespace gcrun::outputs
