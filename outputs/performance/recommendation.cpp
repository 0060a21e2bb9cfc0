#include "outputs/performance/recommendation.h"

#include <limits>
#include <map>
#include <tuple>

#include <spdlog/fmt/fmt.h>

namespace gcrun::performance {
namespace {

// Smaller is cheaper (see recommendation.h).
auto costOf(const PredictionRow& row) {
  const double time_to_target = row.predicted_time_to_target_s.value_or(std::numeric_limits<double>::infinity());
  return std::make_tuple(time_to_target, row.sync_every.value_or(1), -row.mib_per_step, row.predicted.total_ms);
}

std::string configurationText(const PredictionRow& row) {
  const auto strategy = row.sync_every ? row.strategy + " H=" + std::to_string(*row.sync_every) : row.strategy;
  return "run " + row.run + " (" + strategy + ", " + row.reducer + ")";
}

}  // namespace

namespace {

// Notes `row`'s run among those left out by the quality rule, once.
void noteLeftOut(const PredictionRow& row, const std::string& why, Recommendation& recommendation) {
  for (const auto& [run, reason] : recommendation.left_out) {
    if (run == row.run) return;
  }
  recommendation.left_out.emplace_back(row.run, why);
}

}  // namespace

std::vector<Recommendation> recommend(const std::vector<PredictionRow>& rows, double target_cu,
                                      const QualityRule& quality) {
  std::vector<Recommendation> recommendations;
  std::vector<std::optional<size_t>> highest_within;  // by recommendation: the highest CU passing the rule
  std::map<std::pair<int, std::string>, size_t> index;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    const auto [at, added] = index.emplace(std::make_pair(row.workers, row.network), recommendations.size());
    if (added) {
      recommendations.push_back({row.workers, row.network, std::nullopt, i});
      highest_within.emplace_back();
    }
    auto& r = recommendations[at->second];
    if (row.predicted.cu() > rows[r.highest_cu].predicted.cu()) r.highest_cu = i;
    if (const auto why = quality.whyOutside(row)) {
      noteLeftOut(row, *why, r);
      continue;
    }
    auto& highest = highest_within[at->second];
    if (!highest || row.predicted.cu() > rows[*highest].predicted.cu()) highest = i;
    if (row.predicted.cu() >= target_cu && (!r.pick || costOf(row) < costOf(rows[*r.pick]))) r.pick = i;
  }
  // The closest is one that passes the rule where any does.
  for (size_t k = 0; k < recommendations.size(); ++k) {
    if (highest_within[k]) recommendations[k].highest_cu = *highest_within[k];
  }
  return recommendations;
}

std::string recommendationLine(const Recommendation& recommendation, const std::vector<PredictionRow>& rows,
                               double target_cu) {
  const auto where = fmt::format("{}, {} workers: ", recommendation.network, recommendation.workers);
  std::string line;
  if (!recommendation.pick) {
    const auto& closest = rows[recommendation.highest_cu];
    line = where + fmt::format("no configuration {}reaches CU {:.2f}; the highest is {} at {:.2f}",
                               recommendation.left_out.empty() ? "" : "within the quality rule ", target_cu,
                               configurationText(closest), closest.predicted.cu());
  } else {
    const auto& row = rows[*recommendation.pick];
    line = where + fmt::format("{} reaches CU {:.2f} at {:.1f} ms per step", configurationText(row), row.predicted.cu(),
                               row.predicted.total_ms);
    if (row.predicted_time_to_target_s) {
      line += fmt::format(", {:.0f} s to the target", *row.predicted_time_to_target_s);
    }
  }
  std::string left_out;
  for (const auto& [run, why] : recommendation.left_out)
    left_out += (left_out.empty() ? "" : ", ") + run + " (" + why + ")";
  return left_out.empty() ? line : line + "; left out by the quality rule: " + left_out;
}

std::vector<std::string> recommendationLines(const std::vector<PredictionRow>& rows,
                                             const std::optional<double>& target_cu, const QualityRule& quality) {
  std::vector<std::string> lines;
  if (!target_cu || rows.empty()) return lines;
  for (const auto& recommendation : recommend(rows, *target_cu, quality)) {
    lines.push_back(recommendationLine(recommendation, rows, *target_cu));
  }
  return lines;
}

}  // namespace gcrun::performance
