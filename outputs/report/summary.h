#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "outputs/report/run_data.h"
#include "outputs/report/target.h"

namespace gcrun::outputs {

// Mean, sample standard deviation (n - 1; 0 for one value), minimum and maximum.
struct Spread {
  size_t count = 0;
  double mean = 0, std = 0, min = 0, max = 0;
};
Spread spreadOf(const std::vector<double>& values);

// The runs of one configuration: those whose resolved settings differ only by seed.
struct ConfigGroup {
  std::string name;                  // the runs' common name, else their experiment's
  std::vector<const RunData*> runs;  // ordered by seed
  std::string settings;              // the settings that tell this configuration from the others
  std::string reducer;
  Baseline baseline = Baseline::none;  // the first run's
  std::string metric;
  Spread final_metric;                      // over the completed runs that reported it
  std::optional<double> time_per_batch_ms;  // mean of the runs' medians
  int workers = 1;                          // the world size
  int simulated_workers = 1;                // per process, computing in turn
  double compute_per_batch_ms = 0;          // one simulated worker's forward and backward
  double mib_per_epoch = 0;
  double compression = 0;
  std::optional<double> paper_value;
  std::string paper_source;
  std::string status;  // "3 completed", "2 completed, 1 failed", ...
  // Filled in by annotateGroups when the report asks for them.
  std::optional<Spread> time_to_target_s;  // measured, over the seeds that reached the target
  size_t reached_target = 0;
  std::optional<double> projected_ms_per_batch, projected_speedup_vs_exact, projected_speedup_vs_fp16;
  std::optional<double> projected_cu;                // compute utilisation: compute over the projected time per batch
  std::optional<double> projected_time_to_target_s;  // steps to the target x the projected time per batch
  std::optional<double> paper_time_per_batch_ms;
  std::optional<double> compression_vs_fp16;  // what the fp16 configuration sends over what this one sends
};

// What a report adds to each run when asked: its time to a target, and its projection on another
// network and worker count (performance::projectRuns fills it in).
struct RunProjection {
  double ms_per_batch = 0;
  double cu = 1;
  std::optional<double> speedup_vs_exact, speedup_vs_fp16;
};
struct ReportProjection {
  std::string label;                            // "16 workers, 10gbit/20us"
  std::map<std::string, RunProjection> by_dir;  // runs without a timeline are missing
};

// Groups the runs, in order of first appearance, and works out each group's numbers; `settings`
// lists the configuration keys whose values differ between groups. A run's config.yaml holds the
// settings of its own reducer only, so a reducer's settings show where that reducer ran.
std::vector<ConfigGroup> groupRuns(const std::vector<RunData>& runs);

// The optional columns: measured time to `target` (runs loaded with its metric), the projection's
// time per batch and speedups (the mean over a configuration's seeds), the paper's time per batch,
// and the data sent against the half-precision baseline (fp16) where a configuration of it is among
// them (ConfigGroup::baseline).
void annotateGroups(std::vector<ConfigGroup>& groups, const Target* target, const ReportProjection* projection);

// The report's table in the layout of the paper's Tables 3-7, as text cells (Markdown and HTML
// render the same cells, each escaped for its format), and as CSV with raw numbers (text cells
// neutralized against spreadsheet formulas: csvField).
struct TextTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};
// The report's opening line: the configuration that sends least while staying within a point of
// exact averaging's final metric (1% of it for a loss or perplexity), "rank2 is within 0.4 points
// of exact at 1/54 of the data"; where none does, the best of the others and how far it is. Empty
// without a completed full-precision baseline (exact; ConfigGroup::baseline) and another
// configuration to compare with it.
std::string findingLine(const std::vector<ConfigGroup>& groups);

TextTable resultTable(const std::vector<ConfigGroup>& groups, const std::string& projection_label = "");
std::string markdownTable(const TextTable& table);
std::string csvTable(const std::vector<ConfigGroup>& groups);

}  // namespace gcrun::outputs
