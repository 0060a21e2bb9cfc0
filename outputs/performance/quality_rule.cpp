#include "outputs/performance/quality_rule.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <spdlog/fmt/fmt.h>

namespace gcrun::performance {
namespace {

// A value that equals the tolerance after rounding (0.697 - 0.687) is within it.
constexpr double kRoundingSlack = 1e-9;

// Accuracy is a share: its differences read as points.
bool inPoints(const std::string& metric) { return metric.find("accuracy") != std::string::npos; }

// "1 point", "2 points", "1%", "0.01".
std::string toleranceText(const std::string& metric, double share) {
  if (inPoints(metric)) return fmt::format("{:g} point{}", 100 * share, 100 * share == 1 ? "" : "s");
  if (outputs::lowerIsBetter(metric)) return fmt::format("{:g}%", 100 * share);
  return fmt::format("{:g}", share);
}

// How far behind the best a value is, in words: "4.9 points lower", "test.loss 3.2% higher".
std::string shortfallText(const std::string& metric, double shortfall, double best) {
  if (inPoints(metric)) return fmt::format("{:.1f} points lower", 100 * shortfall);
  if (!outputs::lowerIsBetter(metric)) return fmt::format("{} {:.3g} lower", metric, shortfall);
  if (best == 0) return fmt::format("{} {:.3g} higher", metric, shortfall);
  return fmt::format("{} {:.1f}% higher", metric, 100 * shortfall / std::abs(best));
}

// One configuration's final values over its seeds (one per run directory).
struct Seeds {
  std::map<std::string, std::optional<double>> by_dir;
  bool exact = false;
  double mean() const {
    double sum = 0;
    for (const auto& [dir, value] : by_dir) sum += *value;
    return sum / static_cast<double>(by_dir.size());
  }
  double deviation() const {  // the sample standard deviation; 0 for one seed
    if (by_dir.size() < 2) return 0;
    const double m = mean();
    double squares = 0;
    for (const auto& [dir, value] : by_dir) squares += (*value - m) * (*value - m);
    return std::sqrt(squares / static_cast<double>(by_dir.size() - 1));
  }
  bool complete() const {
    return std::all_of(by_dir.begin(), by_dir.end(), [](const auto& seed) { return seed.second.has_value(); });
  }
};

// The configurations of one comparison, judged against its best: their outside runs into `rule`.
void judgeComparison(const std::string& metric, const std::map<std::string, Seeds>& configurations, double share,
                     QualityRule& rule) {
  const bool lower = outputs::lowerIsBetter(metric);
  const Seeds* best = nullptr;
  for (const auto& [name, seeds] : configurations) {
    if (seeds.complete() && (!best || (lower ? seeds.mean() < best->mean() : seeds.mean() > best->mean()))) {
      best = &seeds;
    }
  }
  if (!best) return;
  const double tolerance = std::max(lower ? share * std::abs(best->mean()) : share, best->deviation());
  for (const auto& [name, seeds] : configurations) {
    if (seeds.exact) continue;  // the reference
    std::string why = "no final " + metric;
    if (seeds.complete()) {
      const double shortfall = lower ? seeds.mean() - best->mean() : best->mean() - seeds.mean();
      if (shortfall <= tolerance + kRoundingSlack * std::max(1.0, std::abs(best->mean()))) continue;
      why = shortfallText(metric, shortfall, best->mean());
    }
    for (const auto& [dir, value] : seeds.by_dir) rule.outside_by_dir[dir] = why;
  }
}

// "test.accuracy is within 1 point", with any other comparison's metric after it in brackets.
std::string toleranceSentence(const std::set<std::string>& metrics, double share) {
  std::string within;
  for (const auto& metric : metrics) {
    within += within.empty() ? metric + " is within " + toleranceText(metric, share)
                             : " (" + metric + ": " + toleranceText(metric, share) + ")";
  }
  return "Quality rule: a method is named fastest only if its final " + within +
         " of the best configuration's in its comparison (means over seeds), or within that configuration's "
         "standard deviation over seeds if larger (--quality-tolerance; exact, the reference, always counts); a "
         "faster method outside the rule is noted beside the answer.";
}

// A run reached the target where any of its rows has a time to it (those at its own H).
QualityRule targetRule(const std::vector<PredictionRow>& rows, const outputs::Target& target) {
  QualityRule rule;
  rule.kind = QualityRule::Kind::target;
  rule.target = target;
  std::set<std::string> reached;
  for (const auto& row : rows) {
    if (row.predicted_time_to_target_s) reached.insert(row.dir);
  }
  for (const auto& row : rows) {
    if (!reached.count(row.dir)) {
      rule.outside_by_dir[row.dir] =
          fmt::format("did not reach {} {} {:g}", target.metric, target.lower_is_better ? "<=" : ">=", target.value);
    }
  }
  rule.sentence = fmt::format(
      "Quality rule: methods are compared by predicted time to {} {} {:g} (--target), and one that did not reach it "
      "is never named fastest.",
      target.metric, target.lower_is_better ? "<=" : ">=", target.value);
  return rule;
}

}  // namespace

std::optional<std::string> QualityRule::whyOutside(const PredictionRow& row) const {
  const auto found = outside_by_dir.find(row.dir);
  if (found == outside_by_dir.end()) return std::nullopt;
  return found->second;
}

QualityRule qualityRule(const std::vector<PredictionRow>& rows, const QualityTolerance& tolerance,
                        const std::optional<outputs::Target>& target) {
  if (target) return targetRule(rows, *target);
  QualityRule rule;
  if (!tolerance.weighed) {
    rule.sentence =
        "Quality not weighed (--quality-tolerance off): each cell names the fastest method per step, whatever model "
        "it trains.";
    return rule;
  }
  // comparison -> its metric (the first run's) -> configuration -> seeds
  std::map<std::string, std::pair<std::string, std::map<std::string, Seeds>>> comparisons;
  std::set<std::string> metrics, weighed;
  for (const auto& row : rows) {
    auto& [metric, configurations] = comparisons[row.comparison];
    if (metric.empty()) metric = row.metric;
    metrics.insert(row.metric);
    auto& seeds = configurations[row.configuration];
    seeds.by_dir[row.dir] = row.metric == metric ? row.final_value : std::nullopt;
    seeds.exact = seeds.exact || isExactBaseline(row);
    if (row.final_value && row.metric == metric) weighed.insert(metric);
  }
  if (weighed.empty()) {
    std::string names;
    for (const auto& metric : metrics) names += (names.empty() ? "" : " or ") + metric;
    rule.sentence =
        "Quality not weighed: no run carries a final " + names + ", so each cell names the fastest method per step.";
    return rule;
  }
  rule.kind = QualityRule::Kind::tolerance;
  for (const auto& [comparison, configurations] : comparisons) {
    judgeComparison(configurations.first, configurations.second, tolerance.share, rule);
  }
  rule.sentence = toleranceSentence(weighed, tolerance.share);
  return rule;
}

}  // namespace gcrun::performance
