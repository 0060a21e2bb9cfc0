// "Does it pay" weighs quality: a method that trains a worse model is never named fastest. The
// rule on hand-made rows (tolerance edges, a loss, seeds, a target, no metric), the
// recommendation's exclusions, and gcrun predict on run directories written by hand.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "hyperparams/base/errors.h"
#include "outputs/performance/prediction_matrix.h"
#include "outputs/performance/quality_rule.h"
#include "outputs/performance/recommendation.h"
#include "outputs/performance/report_projection.h"
#include "tests/support/command.h"
#include "tests/support/crafted_trace.h"
#include "tests/support/temp_dir.h"

namespace gcrun::performance {
namespace {

using testing::contains;
using testing::readFile;
using testing::runCommand;
using testing::TempDir;

// One run's row at 16 workers on 100mbit/20us, `speedup` over exact, its final `value` of `metric`.
PredictionRow rowOf(const std::string& configuration, double speedup, std::optional<double> value,
                    const std::string& metric = "test.accuracy", int seed = 1) {
  PredictionRow row;
  row.run = configuration + "-seed" + std::to_string(seed);
  row.dir = "runs/" + row.run;
  row.configuration = configuration;
  row.comparison = "task.name=fashion-mnist\n";
  row.workers = 16;
  row.network = "100mbit/20us";
  row.predicted.total_ms = 100 / speedup;
  row.predicted.compute_ms = 50;
  row.speedup_vs_exact = speedup;
  if (configuration != "exact") row.break_even_vs_exact = 1e9;
  row.metric = metric;
  row.final_value = value;
  return row;
}

std::string onlyCell(const std::vector<PredictionRow>& rows, const QualityRule& rule) {
  return cellText(predictionMatrices(rows, rule)[0].cells[0][0]);
}

TEST(QualityRule, TheFastestWithinToleranceIsNamedAndAFasterWorseOneNoted) {
  const std::vector<PredictionRow> rows = {rowOf("exact", 1, 0.697), rowOf("rank1", 7.99, 0.648),
                                           rowOf("rank4", 3.1, 0.695)};
  const auto rule = qualityRule(rows, QualityTolerance{}, std::nullopt);
  EXPECT_EQ(rule.kind, QualityRule::Kind::tolerance);
  EXPECT_EQ(onlyCell(rows, rule), "rank4-seed1 3.1x; rank1-seed1: 7.99x, but 4.9 points lower");
  EXPECT_TRUE(contains(rule.sentence, "final test.accuracy is within 1 point of the best")) << rule.sentence;
  // Off: speed per step alone, as before the rule, and it says so.
  const auto off = qualityRule(rows, QualityTolerance{false, kDefaultQualityTolerance}, std::nullopt);
  EXPECT_EQ(onlyCell(rows, off), "rank1-seed1 7.99x");
  EXPECT_TRUE(contains(off.sentence, "Quality not weighed (--quality-tolerance off)")) << off.sentence;
  // The heat map names the same method and notes the other.
  const auto label = matrixHeatMaps(rows, rule)[0].cells[0].label;
  EXPECT_EQ(label, (std::vector<std::string>{"rank4-seed1", "3.1x", "(rank1-seed1 7.99x,", "but 4.9 points lower)"}));
}

TEST(QualityRule, ToleranceEdges) {
  const auto outside = [](double value, double share) {
    const std::vector<PredictionRow> rows = {rowOf("exact", 1, 0.70), rowOf("m", 2, value)};
    return qualityRule(rows, QualityTolerance{true, share}, std::nullopt).whyOutside(rows[1]);
  };
  EXPECT_FALSE(outside(0.69, 0.01));  // exactly 1 point below: within
  EXPECT_FALSE(outside(0.71, 0.01));  // better than exact: it is the best
  EXPECT_EQ(outside(0.6899, 0.01), "1.0 points lower");
  EXPECT_FALSE(outside(0.6899, 0.02));                // a wider tolerance
  EXPECT_EQ(outside(0.6999, 0), "0.0 points lower");  // none: only the best itself
  // The best configuration's spread over seeds widens the tolerance: 0.68 and 0.72 have std 0.028.
  std::vector<PredictionRow> rows = {rowOf("exact", 1, 0.68, "test.accuracy", 1),
                                     rowOf("exact", 1, 0.72, "test.accuracy", 2), rowOf("m", 2, 0.675)};
  EXPECT_FALSE(qualityRule(rows, QualityTolerance{}, std::nullopt).whyOutside(rows[2]));
  rows[2].final_value = 0.67;
  EXPECT_EQ(qualityRule(rows, QualityTolerance{}, std::nullopt).whyOutside(rows[2]), "3.0 points lower");
  // A configuration without the metric cannot be shown to be as good.
  rows[2].final_value.reset();
  EXPECT_EQ(qualityRule(rows, QualityTolerance{}, std::nullopt).whyOutside(rows[2]), "no final test.accuracy");
}

TEST(QualityRule, ALossIsBetterLowerAndItsToleranceIsAShareOfTheBest) {
  const std::vector<PredictionRow> rows = {rowOf("exact", 1, 2.00, "validation.loss"),
                                           rowOf("fp4", 3, 2.05, "validation.loss"),
                                           rowOf("fp8", 2, 2.02, "validation.loss")};
  const auto rule = qualityRule(rows, QualityTolerance{}, std::nullopt);
  EXPECT_EQ(rule.whyOutside(rows[1]), "validation.loss 2.5% higher");
  EXPECT_FALSE(rule.whyOutside(rows[2]));  // 1% above the best: within
  EXPECT_EQ(onlyCell(rows, rule), "fp8-seed1 2x; fp4-seed1: 3x, but validation.loss 2.5% higher");
  EXPECT_TRUE(contains(rule.sentence, "final validation.loss is within 1% of")) << rule.sentence;
}

TEST(QualityRule, EveryMethodOutsideLeavesExact) {
  const std::vector<PredictionRow> rows = {rowOf("exact", 1, 0.70), rowOf("rank1", 5, 0.60)};
  const auto cell = predictionMatrices(rows, qualityRule(rows, QualityTolerance{}, std::nullopt))[0].cells[0][0];
  EXPECT_EQ(cell.verdict, MatrixCell::Verdict::none_within);
  EXPECT_EQ(cellText(cell), "exact: no method passes the quality rule; rank1-seed1: 5x, but 10.0 points lower");
}

TEST(QualityRule, RunsWithoutTheMetricKeepTheSpeedAnswerAndSaySo) {
  const std::vector<PredictionRow> rows = {rowOf("exact", 1, std::nullopt), rowOf("rank1", 5, std::nullopt)};
  const auto rule = qualityRule(rows, QualityTolerance{}, std::nullopt);
  EXPECT_EQ(rule.kind, QualityRule::Kind::not_weighed);
  EXPECT_EQ(onlyCell(rows, rule), "rank1-seed1 5x");
  EXPECT_EQ(rule.sentence,
            "Quality not weighed: no run carries a final test.accuracy, so each cell names the fastest method per "
            "step.");
  EXPECT_TRUE(contains(matrixMarkdown(rows, rule), rule.sentence));
}

TEST(QualityRule, WithATargetTheMatrixComparesTimeToIt) {
  std::vector<PredictionRow> rows = {rowOf("exact", 1, 0.70), rowOf("rank1", 8, 0.60), rowOf("rank4", 3, 0.69),
                                     rowOf("rank2", 5, 0.69)};
  rows[0].predicted_time_to_target_s = 100;
  rows[2].predicted_time_to_target_s = 40;  // rank4 reached it sooner than rank2, slower per step
  rows[3].predicted_time_to_target_s = 50;
  const outputs::Target target{"test.accuracy", 0.65, false};
  const auto rule = qualityRule(rows, QualityTolerance{}, target);
  EXPECT_EQ(rule.kind, QualityRule::Kind::target);
  EXPECT_EQ(rule.whyOutside(rows[1]), "did not reach test.accuracy >= 0.65");
  EXPECT_EQ(onlyCell(rows, rule), "rank4-seed1 2.5x");
  EXPECT_TRUE(contains(rule.sentence, "predicted time to test.accuracy >= 0.65 (--target)")) << rule.sentence;
  EXPECT_TRUE(contains(matrixHeatMaps(rows, rule)[0].title, "predicted time to the target"));
  // Exact did not reach it: no time to compare with, the fastest is named by its time.
  rows[0].predicted_time_to_target_s.reset();
  EXPECT_EQ(onlyCell(rows, qualityRule(rows, QualityTolerance{}, target)),
            "rank4-seed1 (exact outside the quality rule)");
}

TEST(QualityRule, TheRecommendationLeavesOutWorseConfigurationsAndSaysWhy) {
  std::vector<PredictionRow> rows = {rowOf("exact", 1, 2.00, "validation.loss"),
                                     rowOf("diloco-fp4", 3, 2.10, "validation.loss"),
                                     rowOf("diloco", 2, 2.01, "validation.loss")};
  rows[1].strategy = rows[2].strategy = "diloco";
  rows[1].sync_every = rows[2].sync_every = 32;
  rows[1].reducer = "fp4";
  rows[2].reducer = "exact";
  rows[1].predicted.total_ms = 50;  // CU 1.0: the highest, but its model is worse
  rows[2].predicted.total_ms = 55;  // CU 0.91
  const auto rule = qualityRule(rows, QualityTolerance{}, std::nullopt);
  const auto recommendations = recommend(rows, 0.9, rule);
  ASSERT_EQ(recommendations.size(), 1u);
  ASSERT_TRUE(recommendations[0].pick.has_value());
  EXPECT_EQ(*recommendations[0].pick, 2u);
  const auto line = recommendationLine(recommendations[0], rows, 0.9);
  EXPECT_TRUE(contains(line, "run diloco-seed1 (diloco H=32, exact) reaches CU 0.91")) << line;
  EXPECT_TRUE(contains(line, "; left out by the quality rule: diloco-fp4-seed1 (validation.loss 5.0% higher)")) << line;
  // None within the rule reaches the CU: the closest named is one within it.
  const auto none = recommend(rows, 0.95, rule);
  EXPECT_EQ(none[0].highest_cu, 2u);
  EXPECT_TRUE(contains(recommendationLine(none[0], rows, 0.95), "no configuration within the quality rule reaches"));
}

TEST(QualityRule, TheReportSectionStatesTheRule) {
  const std::vector<PredictionRow> rows = {rowOf("exact", 1, 0.697), rowOf("rank1", 7.99, 0.648)};
  const auto sections = matrixSections(rows, PredictOptions{});
  ASSERT_EQ(sections.size(), 1u);
  EXPECT_TRUE(contains(sections[0].text, "\nQuality rule: a method is named fastest only if")) << sections[0].text;
}

TEST(QualityRule, ToleranceFlagValues) {
  EXPECT_FALSE(parseQualityTolerance("off", "--quality-tolerance").weighed);
  EXPECT_DOUBLE_EQ(parseQualityTolerance("0.02", "--quality-tolerance").share, 0.02);
  EXPECT_DOUBLE_EQ(parseQualityTolerance("0", "--quality-tolerance").share, 0);
  for (const char* bad : {"-0.1", "1.5", "2%", "x", "", "nan"}) {
    EXPECT_THROW(parseQualityTolerance(bad, "--quality-tolerance"), UserError) << bad;
  }
}

// gcrun predict on run directories written by hand.
const std::string kGcrun = GCRUN_BINARY_PATH;

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// A completed 2-worker Fashion-MNIST run that sent `bytes` per step and ended at `accuracy`.
void runDir(const TempDir& dir, const std::string& name, const std::string& reducer, int64_t bytes, double accuracy) {
  const auto run = dir.file("runs/" + name);
  std::filesystem::create_directories(run);
  const auto baseline = reducer == "exact" ? "full-precision" : "none";
  write(run + "/run.json", "{\"status\": \"completed\", \"world_size\": 2, \"baseline\": \"" + std::string(baseline) +
                               "\", \"final_metrics\": {\"test.accuracy\": " + std::to_string(accuracy) + "}}\n");
  write(run + "/config.yaml", "task:\n  name: fashion-mnist\nreducer:\n  name: " + reducer + "\n");
  write(run + "/trace-rank0.json", testing::craftedTrace([bytes](int64_t) { return bytes; }));
}

TEST(QualityRulePredict, NamesTheAsGoodMethodAndNotesTheFasterWorseOne) {
  TempDir dir;
  runDir(dir, "exact", "exact", 4000000, 0.697);
  runDir(dir, "rank1", "powersgd", 4000, 0.648);   // fastest, 4.9 points worse
  runDir(dir, "rank4", "powersgd", 40000, 0.695);  // slower, as good
  const auto predict = kGcrun + " predict " + dir.file("runs") + " --workers 16 --bandwidth 100mbit --output ";
  const auto result = runCommand(predict + dir.file("out"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(contains(result.output, "| 16 | rank4 ")) << result.output;
  EXPECT_TRUE(contains(result.output, "; rank1: ")) << result.output;
  EXPECT_TRUE(contains(result.output, ", but 4.9 points lower |")) << result.output;
  EXPECT_TRUE(contains(result.output, "Quality rule: a method is named fastest only if its final test.accuracy"))
      << result.output;
  const auto md = readFile(dir.file("out/predict.md"));
  EXPECT_TRUE(contains(md, "| 16 | rank4 ")) << md;
  EXPECT_TRUE(contains(md, "Quality rule: ")) << md;
  const auto off = runCommand(predict + dir.file("off") + " --quality-tolerance off");
  ASSERT_EQ(off.exit_code, 0) << off.output;
  EXPECT_TRUE(contains(off.output, "| 16 | rank1 ")) << off.output;
  EXPECT_TRUE(contains(off.output, "Quality not weighed (--quality-tolerance off)")) << off.output;
  const auto bad = runCommand(predict + dir.file("bad") + " --quality-tolerance 5%");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_TRUE(contains(bad.output, "--quality-tolerance: '5%' is not a quality tolerance")) << bad.output;
}

}  // namespace
}  // namespace gcrun::performance
