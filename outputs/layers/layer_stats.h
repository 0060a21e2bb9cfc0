#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "outputs/files/safe_files.h"
#include "outputs/metric_sink.h"

namespace gcrun::outputs {

// layers.csv's header line, without the newline.
extern const char kLayerStatsHeader[];

// "64x1x5x5"; "scalar" for a 0-dimensional tensor.
std::string shapeText(const std::vector<int64_t>& shape);

// A row as a CSV line (no newline), and back: nothing when `line` is not a whole row of
// kLayerStatsHeader's columns (another file's line, or one a crash cut short).
std::string formatLayerStatsRow(const LayerStatsRow& row);
std::optional<LayerStatsRow> parseLayerStatsRow(const std::string& line);

// The sink that writes layers.csv: it appends each sampled step's rows to <run dir>/layers.csv and
// flushes them, so a crash leaves whole lines, and ignores every other event. Written through
// files::AppendFile: never through a symlink planted there.
class LayerStatsFile : public MetricSink {
 public:
  // A new file, or with `append` a resumed run's, its header kept (and a row a crash cut short
  // left on its own line).
  LayerStatsFile(const std::string& run_dir, bool append);
  void metric(const MetricEvent&) override {}
  void layerStats(const std::vector<LayerStatsRow>& rows) override;

 private:
  files::AppendFile file_;
};

// A LayerStatsFile in context.run_dir, appending when context.resume.
std::unique_ptr<MetricSink> makeLayerStatsSink(const SinkContext& context);

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
