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

std::vector<Recommendation> recommend(const std::vector<PredictionRow>& rows, double target_cu) {
  std::vector<Recommendation> recommendations;
  std::map<std::pair<int, std::string>, size_t> index;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    const auto [at, added] = index.emplace(std::make_pair(row.workers, row.network), recommendations.size());
    if (added) recommendations.push_back({row.workers, row.network, std::nullopt, i});
    auto& r = recommendations[at->second];
    if (row.predicted.cu() > rows[r.highest_cu].predicted.cu()) r.highest_cu = i;
    if (row.predicted.cu() >= target_cu && (!r.pick || costOf(row) < costOf(rows[*r.pick]))) r.pick = i;
  }
  return recommendations;
}

std::string recommendationLine(const Recommendation& recommendation, const std::vector<PredictionRow>& rows,
                               double target_cu) {
  const auto where = fmt::format("{}, {} workers: ", recommendation.network, recommendation.workers);
  if (!recommendation.pick) {
    const auto& closest = rows[recommendation.highest_cu];
    return where + fmt::format("no configuration reaches CU {:.2f}; the highest is {} at {:.2f}", target_cu,
                               configurationText(closest), closest.predicted.cu());
  }
  const auto& row = rows[*recommendation.pick];
  auto line = where + fmt::format("{} reaches CU {:.2f} at {:.1f} ms per step", configurationText(row),
                                  row.predicted.cu(), row.predicted.total_ms);
  if (row.predicted_time_to_target_s) line += fmt::format(", {:.0f} s to the target", *row.predicted_time_to_target_s);
  return line;
}

std::vector<std::string> recommendationLines(const std::vector<PredictionRow>& rows,
                                             const std::optional<double>& target_cu) {
  std::vector<std::string> lines;
  if (!target_cu || rows.empty()) return lines;
  for (const auto& recommendation : recommend(rows, *target_cu)) {
    lines.push_back(recommendationLine(recommendation, rows, *target_cu));
  }
  return lines;
}

}  // namespace gcrun::performance
