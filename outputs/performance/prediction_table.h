#pragma once

#include <optional>
#include <string>
#include <vector>

#include "outputs/performance/prediction.h"
#include "outputs/report/summary.h"

namespace gcrun::performance {

// The prediction table: one row per run x workers x network, text cells (Markdown escapes them).
outputs::TextTable predictionTable(const std::vector<PredictionRow>& rows, bool with_target);
// predict.csv: the same rows with raw numbers; text cells through csvField. Columns: run, reducer,
// workers, network, measured_ms_per_batch, predicted_ms_per_batch, compute_ms, exposed_comm_ms,
// codec_ms, mib_per_step, speedup_vs_exact, speedup_vs_fp16, break_even_vs_exact_gbit,
// break_even_vs_fp16_gbit (inf: always, 0: never), with a target steps_to_target,
// predicted_time_to_target_s, measured_time_to_target_s, then strategy, sync_every, cu, cu_formula,
// overlapped_ms_per_batch, compute_basis_ms, mib_per_sync, noise and measured_statistic (median, or
// mean over the schedule for a run whose steps differ by it).
std::string predictionCsv(const std::vector<PredictionRow>& rows, bool with_target);

// "no difference" when the speedup is within 1 ± noise, else "1.23x".
std::string speedupText(const std::optional<double>& speedup, double noise);

// The text of a break-even bandwidth: "below 3.2gbit", "always", "never".
std::string breakEvenText(const std::optional<double>& bytes_per_s);

}  // namespace gcrun::performance
