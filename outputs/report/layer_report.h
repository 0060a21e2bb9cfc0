#pragma once

#include <optional>
#include <vector>

#include "outputs/report/plots.h"
#include "outputs/report/report.h"
#include "outputs/report/summary.h"

namespace gcrun::outputs {

// What the report shows of the runs' layers.csv (output.layer_stats_every_steps); nothing when no
// run has one.
//  - A plot of the relative compression error by layer: one curve per configuration, the mean over
//    its seeds with their min-max band, the layers in model order along x, named.
//  - A table of the layers that carry most of each configuration's bytes: its largest, down to 90%
//    of what it sends or 5 layers, with their share, bits per step and compression error.
std::optional<Plot> layerErrorPlot(const std::vector<ConfigGroup>& groups);
std::optional<ReportSection> layerBytesSection(const std::vector<ConfigGroup>& groups);

}  // namespace gcrun::outputs
