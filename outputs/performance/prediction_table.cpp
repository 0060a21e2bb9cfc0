#include "outputs/performance/prediction_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <spdlog/fmt/fmt.h>

#include "outputs/csv_field.h"

namespace gcrun::performance {
namespace {

std::string ms(double value) { return fmt::format("{:.1f}", value); }
std::string optionalMs(const std::optional<double>& value) { return value ? ms(*value) : ""; }
std::string number(const std::optional<double>& value) { return value ? fmt::format("{:.6g}", *value) : ""; }
std::string gbit(const std::optional<double>& bytes_per_s) {
  if (!bytes_per_s) return "";
  if (std::isinf(*bytes_per_s)) return "inf";
  return fmt::format("{:.6g}", 8 * *bytes_per_s / 1e9);
}

// "63.0", or "200.0 (mean)" for a run whose steps differ by its schedule: the mean over it.
std::string measuredText(const PredictionRow& row) {
  if (!row.measured_ms_per_batch) return "";
  const auto text = ms(*row.measured_ms_per_batch);
  return row.measured_statistic == "mean" ? text + " (mean)" : text;
}

// "every-step", "diloco H=32".
std::string strategyText(const PredictionRow& row) {
  return row.sync_every ? row.strategy + " H=" + std::to_string(*row.sync_every) : row.strategy;
}

// "0.93 (formula 0.97)".
std::string cuText(const PredictionRow& row) {
  auto text = fmt::format("{:.2f}", row.predicted.cu());
  if (row.cu_formula) text += fmt::format(" (formula {:.2f})", *row.cu_formula);
  return text;
}

bool anyOverlapped(const std::vector<PredictionRow>& rows) {
  return std::any_of(rows.begin(), rows.end(), [](const PredictionRow& row) { return row.overlapped_ms.has_value(); });
}

}  // namespace

outputs::TextTable predictionTable(const std::vector<PredictionRow>& rows, bool with_target) {
  outputs::TextTable table;
  table.header = {"run",
                  "reducer",
                  "workers",
                  "network",
                  "strategy",
                  "measured ms",
                  "predicted ms",
                  "CU",
                  "compute ms",
                  "exposed comm ms",
                  "codec ms",
                  "MiB/step",
                  "vs exact",
                  "vs fp16",
                  "break-even vs exact",
                  "break-even vs fp16"};
  const bool overlapped = anyOverlapped(rows);
  if (overlapped) table.header.push_back("overlapped ms");
  if (with_target) table.header.insert(table.header.end(), {"steps to target", "predicted s", "measured s"});
  for (const auto& row : rows) {
    std::vector<std::string> cells = {row.run,
                                      row.reducer,
                                      std::to_string(row.workers),
                                      row.network,
                                      strategyText(row),
                                      measuredText(row),
                                      ms(row.predicted.total_ms),
                                      cuText(row),
                                      ms(row.predicted.compute_ms),
                                      ms(row.predicted.exposed_comm_ms),
                                      ms(row.predicted.codec_ms),
                                      fmt::format("{:.3f}", row.mib_per_step),
                                      speedupText(row.speedup_vs_exact, row.noise),
                                      speedupText(row.speedup_vs_fp16, row.noise),
                                      breakEvenText(row.break_even_vs_exact),
                                      breakEvenText(row.break_even_vs_fp16)};
    if (overlapped) cells.push_back(optionalMs(row.overlapped_ms));
    if (with_target) {
      cells.push_back(row.steps_to_target ? std::to_string(*row.steps_to_target) : "not reached");
      cells.push_back(row.predicted_time_to_target_s ? fmt::format("{:.1f}", *row.predicted_time_to_target_s) : "");
      cells.push_back(row.measured_time_to_target_s ? fmt::format("{:.1f}", *row.measured_time_to_target_s) : "");
    }
    table.rows.push_back(std::move(cells));
  }
  return table;
}

std::string predictionCsv(const std::vector<PredictionRow>& rows, bool with_target) {
  std::string out =
      "run,reducer,workers,network,measured_ms_per_batch,predicted_ms_per_batch,compute_ms,exposed_comm_ms,"
      "codec_ms,mib_per_step,speedup_vs_exact,speedup_vs_fp16,break_even_vs_exact_gbit,break_even_vs_fp16_gbit";
  if (with_target) out += ",steps_to_target,predicted_time_to_target_s,measured_time_to_target_s";
  out +=
      ",strategy,sync_every,cu,cu_formula,overlapped_ms_per_batch,compute_basis_ms,mib_per_sync,noise,"
      "measured_statistic\n";
  for (const auto& row : rows) {
    out += fmt::format("{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{},{},{},{}", outputs::csvField(row.run),
                       outputs::csvField(row.reducer), row.workers, outputs::csvField(row.network),
                       number(row.measured_ms_per_batch), row.predicted.total_ms, row.predicted.compute_ms,
                       row.predicted.exposed_comm_ms, row.predicted.codec_ms, row.mib_per_step,
                       number(row.speedup_vs_exact), number(row.speedup_vs_fp16), gbit(row.break_even_vs_exact),
                       gbit(row.break_even_vs_fp16));
    if (with_target) {
      out += fmt::format(",{},{},{}", row.steps_to_target ? std::to_string(*row.steps_to_target) : "",
                         number(row.predicted_time_to_target_s), number(row.measured_time_to_target_s));
    }
    out += fmt::format(",{},{},{:.6g},{},{},{:.6g},{:.6g},{:.6g},{}\n", outputs::csvField(row.strategy),
                       row.sync_every ? std::to_string(*row.sync_every) : "", row.predicted.cu(),
                       number(row.cu_formula), number(row.overlapped_ms), row.compute_basis_ms, row.mib_per_sync,
                       row.noise, row.measured_statistic);
  }
  return out;
}

std::string speedupText(const std::optional<double>& speedup, double noise) {
  if (!speedup) return "";
  if (std::abs(*speedup - 1) <= noise) return "no difference";
  char text[32];
  std::snprintf(text, sizeof text, "%.2fx", *speedup);
  return text;
}

std::string breakEvenText(const std::optional<double>& bytes_per_s) {
  if (!bytes_per_s) return "";
  if (*bytes_per_s <= 0) return "never";
  if (std::isinf(*bytes_per_s)) return "always";
  const double bits = 8 * *bytes_per_s;
  const char* unit = bits >= 1e12 ? "Tbit/s" : bits >= 1e9 ? "Gbit/s" : "Mbit/s";
  const double scaled = bits / (bits >= 1e12 ? 1e12 : bits >= 1e9 ? 1e9 : 1e6);
  char text[48];
  std::snprintf(text, sizeof text, "below %.3g %s", scaled, unit);
  return text;
}

}  // namespace gcrun::performance
