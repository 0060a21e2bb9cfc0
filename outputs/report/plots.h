#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "outputs/files/safe_files.h"
#include "outputs/report/summary.h"

namespace gcrun::outputs {

// One configuration's curve across its seeds: per x, the mean of y and its min-max band.
struct Curve {
  std::string label;
  std::vector<std::array<double, 4>> points;  // x, mean y, min y, max y
  bool marks = false;                         // points alone (break-even points), no line or band
};

// One cell of a heat map: the unit square around (x, y), coloured by `value` (none: blank), its
// label's lines written in it.
struct HeatCell {
  int x = 1, y = 1;
  std::optional<double> value;
  std::vector<std::string> label;
};

struct Plot {
  std::string name;  // file stem: <name>.dat, .gp, .png, .svg
  std::string title, x_label, y_label;
  std::vector<Curve> curves;  // one per configuration that has data for it
  bool log_x = false, log_y = false;
  std::vector<std::string> x_tics = {};  // labels of x = 1, 2, ... in order (layer names), if any
  // A heat map instead of curves: cells at x = 1..x_tics.size(), y = 1..y_tics.size(), coloured on
  // a log scale that diverges at 1 (below red, above blue; values above 0).
  std::vector<HeatCell> cells = {};
  std::vector<std::string> y_tics = {};
  std::string colour_label = {};
};

// The report's figures: the final metric against epochs, MiB sent per worker and wall-clock time
// (points aligned by their index across seeds, x averaged), and the training loss against steps.
std::vector<Plot> reportPlots(const std::vector<ConfigGroup>& groups);

// The data file a plot's gnuplot script reads: one block per curve ("# label" on one line, then
// "x mean min max" lines), blocks separated by two blank lines (gnuplot's `index`); for a heat
// map, one "x y value" line per cell with a value (its labels are in the script).
std::string plotData(const Plot& plot);

struct RenderedPlots {
  std::map<std::string, std::string> svg;  // by plot name: the SVG drawn now (never one found in `dir`)
  std::vector<std::string> images;         // the .png and .svg files drawn now, in `dir`
  std::string note;                        // why some images are missing (no gnuplot, or its error)
};

// Writes each plot's .dat and .gp into `dir` and runs gnuplot on it for <name>.png and <name>.svg.
// Labels reach gnuplot only as string literals (gnuplotString). gnuplot runs in a fresh directory
// of its own, and its files are then moved into `dir`, replacing whatever was there, symlinks
// included.
RenderedPlots renderPlots(const std::vector<Plot>& plots, const files::Directory& dir);

}  // namespace gcrun::outputs
