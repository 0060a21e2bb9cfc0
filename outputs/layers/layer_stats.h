#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "outputs/files/safe_files.h"

namespace gcrun::outputs {

// One parameter at one sampled step: a row of layers.csv (output.layer_stats_every_steps), from
// rank 0's own tensors.
struct LayerStatsRow {
  int64_t step = 0;
  std::string parameter;  // as torch::nn::Module::named_parameters() names it
  std::vector<int64_t> shape;
  int64_t elements = 0;
  std::optional<uint64_t> bits;  // what this worker sent for it that step; unknown if its reducer does not say
  double grad_norm = 0;          // ||gradient||, this worker's, before the reduce
  // ||memory|| / ||send||: the share of what this worker sent that the reduce lost (0 for exact
  // averaging); unknown when the send is zero.
  std::optional<double> rel_compression_error;
  std::optional<int64_t> rank;  // of its low-rank approximation; unknown when it was not factorised
};

// layers.csv's header line, without the newline.
extern const char kLayerStatsHeader[];

// "64x1x5x5"; "scalar" for a 0-dimensional tensor.
std::string shapeText(const std::vector<int64_t>& shape);

// A row as a CSV line (no newline), and back: nothing when `line` is not a whole row of
// kLayerStatsHeader's columns (another file's line, or one a crash cut short).
std::string formatLayerStatsRow(const LayerStatsRow& row);
std::optional<LayerStatsRow> parseLayerStatsRow(const std::string& line);

// Appends each sampled step's rows to <run dir>/layers.csv and flushes them, so a crash leaves
// whole lines. Written through files::AppendFile: never through a symlink planted there.
class LayerStatsFile {
 public:
  // A new file, or with `append` a resumed run's, its header kept (and a row a crash cut short
  // left on its own line).
  LayerStatsFile(const std::string& run_dir, bool append);
  void write(const std::vector<LayerStatsRow>& rows);

 private:
  files::AppendFile file_;
};

// One parameter over a run's sampled steps, as a report shows it.
struct LayerSummary {
  std::string parameter;
  std::string shape;  // shapeText
  int64_t elements = 0;
  size_t samples = 0;
  std::optional<double> mean_bits;               // per sampled step, over those that know it
  std::optional<double> mean_compression_error;  // over the samples that have one
  std::optional<int64_t> rank;                   // the last sample's
};

// The parameters of the layers.csv at `path`, in the order of their first row; none when the
// file is missing. A file that is not a regular one within files::kMaxMetricsBytes, or that does
// not start with kLayerStatsHeader, is a UserError naming it; rows that do not parse are skipped.
std::vector<LayerSummary> readLayerSummaries(const std::string& path);

}  // namespace gcrun::outputs
