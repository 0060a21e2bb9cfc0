#include "outputs/performance/prediction_matrix.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <spdlog/fmt/fmt.h>

#include "outputs/report/safe_text.h"

namespace gcrun::performance {
namespace {

std::string times(double speedup) { return fmt::format("{:.3g}x", speedup); }

template <typename T>
size_t indexOf(std::vector<T>& items, const T& item) {
  const auto found = std::find(items.begin(), items.end(), item);
  if (found != items.end()) return static_cast<size_t>(found - items.begin());
  items.push_back(item);
  return items.size() - 1;
}

// A run that syncs models is predicted at each H asked for: its H names the method too.
std::string methodOf(const PredictionRow& row) {
  return row.sync_every ? row.run + " (H=" + std::to_string(*row.sync_every) + ")" : row.run;
}

MatrixCell cellOf(const PredictionRow& method, MatrixCell::Verdict verdict) {
  return {verdict, methodOf(method), method.speedup_vs_exact,
          isFp16Baseline(method) ? std::nullopt : method.speedup_vs_fp16};
}

// The verdict by speed over one worker count and network's rows of one comparison.
MatrixCell judgeSpeed(const std::vector<const PredictionRow*>& rows) {
  const bool has_exact =
      std::any_of(rows.begin(), rows.end(), [](const auto* row) { return row->speedup_vs_exact.has_value(); });
  if (!has_exact) {
    const auto* fastest = *std::min_element(rows.begin(), rows.end(), [](const auto* a, const auto* b) {
      return a->predicted.total_ms < b->predicted.total_ms;
    });
    return cellOf(*fastest, MatrixCell::Verdict::no_exact);
  }
  const PredictionRow* best = nullptr;
  for (const auto* row : rows) {
    if (row->speedup_vs_exact && !isExactBaseline(*row) &&
        (!best || *row->speedup_vs_exact > *best->speedup_vs_exact)) {
      best = row;
    }
  }
  if (!best) return {MatrixCell::Verdict::only_exact, "", std::nullopt, std::nullopt};
  const double speedup = *best->speedup_vs_exact;
  if (std::abs(speedup - 1) <= best->noise) return cellOf(*best, MatrixCell::Verdict::no_difference);
  return cellOf(*best, speedup > 1 ? MatrixCell::Verdict::faster : MatrixCell::Verdict::exact);
}

// Under a target rule the rows that reached it, each with its time to the target as its time and
// its speedups against the baselines' times to it (none where a baseline did not reach it).
std::vector<PredictionRow> timedToTarget(const std::vector<const PredictionRow*>& rows) {
  std::optional<double> exact_s, fp16_s;
  for (const auto* row : rows) {
    if (isExactBaseline(*row)) exact_s = row->predicted_time_to_target_s;
    if (isFp16Baseline(*row)) fp16_s = row->predicted_time_to_target_s;
  }
  std::vector<PredictionRow> timed;
  for (const auto* row : rows) {
    if (!row->predicted_time_to_target_s) continue;
    const double seconds = *row->predicted_time_to_target_s;
    auto copy = *row;
    copy.predicted.total_ms = 1000 * seconds;
    copy.speedup_vs_exact = exact_s && seconds > 0 ? std::optional<double>(*exact_s / seconds) : std::nullopt;
    copy.speedup_vs_fp16 = fp16_s && seconds > 0 ? std::optional<double>(*fp16_s / seconds) : std::nullopt;
    timed.push_back(std::move(copy));
  }
  return timed;
}

double fastestMs(const std::vector<const PredictionRow*>& rows) {
  double fastest = std::numeric_limits<double>::infinity();
  for (const auto* row : rows) fastest = std::min(fastest, row->predicted.total_ms);
  return fastest;
}

// Notes the fastest row outside the quality rule where it is faster than every row within it.
void noteOutside(const std::vector<const PredictionRow*>& within, const std::vector<const PredictionRow*>& outside,
                 const QualityRule& quality, MatrixCell& cell) {
  if (outside.empty()) return;
  const auto* fastest = *std::min_element(outside.begin(), outside.end(), [](const auto* a, const auto* b) {
    return a->predicted.total_ms < b->predicted.total_ms;
  });
  if (fastest->predicted.total_ms >= fastestMs(within)) return;
  cell.outside = MatrixCell::Outside{methodOf(*fastest), fastest->speedup_vs_exact, *quality.whyOutside(*fastest)};
}

// The verdict over one worker count and network's rows of one comparison: the fastest among the
// rows the quality rule lets be named, and the fastest of the others where it is faster still.
MatrixCell judge(const std::vector<const PredictionRow*>& rows, const QualityRule& quality) {
  const bool by_target = quality.kind == QualityRule::Kind::target;
  const auto timed = by_target ? timedToTarget(rows) : std::vector<PredictionRow>{};
  std::vector<const PredictionRow*> within, outside;
  if (by_target) {
    for (const auto& row : timed) within.push_back(&row);
  } else {
    for (const auto* row : rows) (isExactBaseline(*row) || !quality.whyOutside(*row) ? within : outside).push_back(row);
  }
  const bool has_outside_method = by_target ? timed.size() < rows.size() : !outside.empty();
  if (within.empty()) {
    MatrixCell none{MatrixCell::Verdict::none_within, "", std::nullopt, std::nullopt};
    none.exact_outside = true;
    return none;
  }
  auto cell = judgeSpeed(within);
  if (cell.verdict == MatrixCell::Verdict::only_exact && has_outside_method) {
    cell.verdict = MatrixCell::Verdict::none_within;
  }
  cell.exact_outside = cell.verdict == MatrixCell::Verdict::no_exact &&
                       std::any_of(rows.begin(), rows.end(), [](const auto* row) { return isExactBaseline(*row); });
  noteOutside(within, outside, quality, cell);
  return cell;
}

// "1.9x (1.3x over fp16)": a method's speedups over exact and fp16.
std::string speedupText(const MatrixCell& cell) {
  return times(*cell.speedup_vs_exact) +
         (cell.speedup_vs_fp16 ? " (" + times(*cell.speedup_vs_fp16) + " over fp16)" : "");
}

// "exact" where every method is outside the quality rule and exact is not, else "no run".
std::string noneWithinText(const MatrixCell& cell) {
  return std::string(cell.exact_outside ? "no run" : "exact:") + " no method passes the quality rule";
}

// "powersgd-rank1: 7.99x, but 4.9 points lower", or "" where nothing is noted.
std::string outsideText(const MatrixCell& cell) {
  if (!cell.outside) return "";
  const auto& outside = *cell.outside;
  return outside.method + ": " + (outside.speedup_vs_exact ? times(*outside.speedup_vs_exact) : "faster") + ", but " +
         outside.why;
}

std::string noExactText(const MatrixCell& cell) {
  return cell.exact_outside ? "exact outside the quality rule" : "no exact run";
}

// The cell's label in the heat map, one to four lines.
std::vector<std::string> heatLabel(const MatrixCell& cell) {
  std::vector<std::string> label;
  switch (cell.verdict) {
    case MatrixCell::Verdict::faster:
      label = {cell.method, speedupText(cell)};
      break;
    case MatrixCell::Verdict::no_difference:
      label = {"no difference", cell.method + " " + times(*cell.speedup_vs_exact)};
      break;
    case MatrixCell::Verdict::exact:
      label = {"exact", "next: " + cell.method + " " + times(*cell.speedup_vs_exact)};
      break;
    case MatrixCell::Verdict::only_exact:
      label = {"only exact"};
      break;
    case MatrixCell::Verdict::none_within:
      label = {cell.exact_outside ? "no run" : "exact", "no method passes"};
      break;
    case MatrixCell::Verdict::no_run:
      return {};
    case MatrixCell::Verdict::no_exact:
      label = {cell.method, noExactText(cell)};
      break;
  }
  if (cell.outside) {  // two lines: one would be wider than the cell
    const auto& outside = *cell.outside;
    const auto speedup = outside.speedup_vs_exact ? " " + times(*outside.speedup_vs_exact) : "";
    label.push_back("(" + outside.method + speedup + ",");
    label.push_back("but " + outside.why + ")");
  }
  return label;
}

}  // namespace

const char kMatrixLegend[] =
    "Fastest method by worker count (rows) and network (columns): each cell names the fastest run that passes the "
    "quality rule, with its predicted speedup over exact (and over fp16 where there is an fp16 run); \"no "
    "difference\" when that speedup is within the prediction's noise of 1, \"exact\" when exact is faster than "
    "every method (with the next fastest); after a semicolon, a faster run that the quality rule leaves out, and "
    "why.";

std::vector<PredictionMatrix> predictionMatrices(const std::vector<PredictionRow>& rows, const QualityRule& quality) {
  struct Collected {
    std::vector<std::string> runs;
    std::vector<int> workers;
    std::vector<std::string> networks;
    std::map<std::pair<size_t, size_t>, std::vector<const PredictionRow*>> cells;  // by worker, network
  };
  std::vector<std::string> comparisons;
  std::vector<Collected> collected;
  for (const auto& row : rows) {
    const size_t c = indexOf(comparisons, row.comparison);
    if (c == collected.size()) collected.emplace_back();
    auto& into = collected[c];
    indexOf(into.runs, row.run);
    into.cells[{indexOf(into.workers, row.workers), indexOf(into.networks, row.network)}].push_back(&row);
  }
  std::vector<PredictionMatrix> matrices;
  for (const auto& from : collected) {
    PredictionMatrix matrix{"", from.workers, from.networks, {}};
    for (const auto& run : from.runs) matrix.runs += (matrix.runs.empty() ? "" : ", ") + run;
    for (size_t w = 0; w < from.workers.size(); ++w) {
      std::vector<MatrixCell> line;
      for (size_t n = 0; n < from.networks.size(); ++n) {
        const auto found = from.cells.find({w, n});
        line.push_back(found == from.cells.end() ? MatrixCell{MatrixCell::Verdict::no_run, "", {}, {}}
                                                 : judge(found->second, quality));
      }
      matrix.cells.push_back(std::move(line));
    }
    matrices.push_back(std::move(matrix));
  }
  return matrices;
}

namespace {

// The answer alone, without the note of a method outside the quality rule.
std::string answerText(const MatrixCell& cell) {
  switch (cell.verdict) {
    case MatrixCell::Verdict::faster:
      return cell.method + " " + speedupText(cell);
    case MatrixCell::Verdict::no_difference:
      return "no difference";
    case MatrixCell::Verdict::exact:
      return "exact (next: " + cell.method + " " + times(*cell.speedup_vs_exact) + ")";
    case MatrixCell::Verdict::only_exact:
      return "only exact";
    case MatrixCell::Verdict::none_within:
      return noneWithinText(cell);
    case MatrixCell::Verdict::no_run:
      return "";
    case MatrixCell::Verdict::no_exact:
      break;
  }
  const auto fp16 = cell.speedup_vs_fp16 ? " " + times(*cell.speedup_vs_fp16) + " over fp16" : "";
  return cell.method + fp16 + " (" + noExactText(cell) + ")";
}

}  // namespace

std::string cellText(const MatrixCell& cell) {
  const auto answer = answerText(cell);
  return cell.outside ? answer + "; " + outsideText(cell) : answer;
}

outputs::TextTable matrixTable(const PredictionMatrix& matrix) {
  outputs::TextTable table;
  table.header = {"workers"};
  table.header.insert(table.header.end(), matrix.networks.begin(), matrix.networks.end());
  for (size_t w = 0; w < matrix.workers.size(); ++w) {
    std::vector<std::string> line = {std::to_string(matrix.workers[w])};
    for (const auto& cell : matrix.cells[w]) line.push_back(cellText(cell));
    table.rows.push_back(std::move(line));
  }
  return table;
}

std::string matrixMarkdown(const std::vector<PredictionRow>& rows, const QualityRule& quality) {
  const auto matrices = predictionMatrices(rows, quality);
  if (matrices.empty()) return "";
  std::string out = outputs::markdownText(kMatrixLegend) + "\n\n" + outputs::markdownText(quality.sentence) + "\n\n";
  for (const auto& matrix : matrices) {
    if (matrices.size() > 1) out += outputs::markdownText("Runs " + matrix.runs + ":") + "\n\n";
    out += outputs::markdownTable(matrixTable(matrix)) + "\n";
  }
  return out;
}

outputs::Plot matrixHeatMap(const PredictionMatrix& matrix, const std::string& name) {
  outputs::Plot plot{
      name, "fastest method by workers and network: predicted speedup over exact", "network", "workers", {}};
  plot.x_tics = matrix.networks;
  for (const int workers : matrix.workers) plot.y_tics.push_back(std::to_string(workers));
  plot.colour_label = "speedup over exact (log scale)";
  for (size_t w = 0; w < matrix.cells.size(); ++w) {
    for (size_t n = 0; n < matrix.cells[w].size(); ++n) {
      const auto& cell = matrix.cells[w][n];
      const bool coloured =
          cell.verdict != MatrixCell::Verdict::no_exact && cell.speedup_vs_exact && *cell.speedup_vs_exact > 0;
      plot.cells.push_back({static_cast<int>(n + 1), static_cast<int>(w + 1),
                            coloured ? cell.speedup_vs_exact : std::nullopt, heatLabel(cell)});
    }
  }
  return plot;
}

std::vector<outputs::Plot> matrixHeatMaps(const std::vector<PredictionRow>& rows, const QualityRule& quality) {
  std::vector<outputs::Plot> plots;
  const auto matrices = predictionMatrices(rows, quality);
  for (size_t i = 0; i < matrices.size(); ++i) {
    auto plot = matrixHeatMap(matrices[i], i == 0 ? "speedup-matrix" : fmt::format("speedup-matrix-{}", i + 1));
    if (quality.kind == QualityRule::Kind::target) {  // the cells compare time to the target
      plot.title = "fastest method by workers and network: predicted time to the target, speedup over exact";
    }
    if (matrices.size() > 1) plot.title += ": " + matrices[i].runs;
    plots.push_back(std::move(plot));
  }
  return plots;
}

}  // namespace gcrun::performance
