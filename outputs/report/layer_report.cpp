#include "outputs/report/layer_report.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include <spdlog/fmt/fmt.h>

namespace gcrun::outputs {
namespace {

constexpr double kCoveredShare = 0.9;
constexpr size_t kMostLayers = 5;

// Every parameter of the groups' runs, in the order of first appearance (model order).
std::vector<std::string> layerOrder(const std::vector<ConfigGroup>& groups) {
  std::vector<std::string> order;
  std::set<std::string> seen;
  for (const auto& group : groups) {
    for (const auto* run : group.runs) {
      for (const auto& layer : run->layers) {
        if (seen.insert(layer.parameter).second) order.push_back(layer.parameter);
      }
    }
  }
  return order;
}

// One of a configuration's layers, over the seeds that sampled it.
struct GroupLayer {
  const LayerSummary* layer = nullptr;  // the first seed's, for its shape and rank
  std::vector<double> bits, errors;     // each seed's mean per sampled step, where it has one
  double meanBits() const { return bits.empty() ? 0 : spreadOf(bits).mean; }
};

std::vector<GroupLayer> layersOf(const ConfigGroup& group) {
  std::vector<GroupLayer> layers;
  std::map<std::string, size_t> index_of;
  for (const auto* run : group.runs) {
    for (const auto& layer : run->layers) {
      const auto [at, added] = index_of.emplace(layer.parameter, layers.size());
      if (added) layers.push_back({&layer, {}, {}});
      auto& entry = layers[at->second];
      if (layer.mean_bits) entry.bits.push_back(*layer.mean_bits);
      if (layer.mean_compression_error) entry.errors.push_back(*layer.mean_compression_error);
    }
  }
  return layers;
}

std::string kibText(double kib) { return kib >= 1 ? fmt::format("{:.1f}", kib) : fmt::format("{:.3f}", kib); }

}  // namespace

std::optional<Plot> layerErrorPlot(const std::vector<ConfigGroup>& groups) {
  const auto order = layerOrder(groups);
  if (order.empty()) return std::nullopt;
  std::map<std::string, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i + 1;
  Plot plot{"compression-error-by-layer",
            "relative compression error by layer",
            "layer (model order)",
            "‖memory‖ / ‖send‖ (mean over sampled steps)",
            {}};
  plot.x_tics = order;
  for (const auto& group : groups) {
    Curve curve{group.name, {}};
    for (const auto& layer : layersOf(group)) {
      if (layer.errors.empty()) continue;
      const auto spread = spreadOf(layer.errors);
      curve.points.push_back(
          {static_cast<double>(position[layer.layer->parameter]), spread.mean, spread.min, spread.max});
    }
    std::sort(curve.points.begin(), curve.points.end());
    if (!curve.points.empty()) plot.curves.push_back(std::move(curve));
  }
  if (plot.curves.empty()) return std::nullopt;
  return plot;
}

std::optional<ReportSection> layerBytesSection(const std::vector<ConfigGroup>& groups) {
  TextTable table{
      {"configuration", "layer", "shape", "elements", "KiB per step", "share of bytes", "compression error", "rank"},
      {}};
  for (const auto& group : groups) {
    auto layers = layersOf(group);
    double total = 0;
    for (const auto& layer : layers) total += layer.meanBits();
    if (total <= 0) continue;
    std::stable_sort(layers.begin(), layers.end(),
                     [](const GroupLayer& a, const GroupLayer& b) { return a.meanBits() > b.meanBits(); });
    double covered = 0;
    for (size_t i = 0; i < layers.size() && i < kMostLayers && covered < kCoveredShare * total; ++i) {
      const auto& layer = layers[i];
      covered += layer.meanBits();
      table.rows.push_back({group.name, layer.layer->parameter, layer.layer->shape,
                            std::to_string(layer.layer->elements), kibText(layer.meanBits() / 8.0 / 1024.0),
                            fmt::format("{:.1f}%", 100.0 * layer.meanBits() / total),
                            layer.errors.empty() ? "—" : fmt::format("{:.3f}", spreadOf(layer.errors).mean),
                            layer.layer->rank ? std::to_string(*layer.layer->rank) : "—"});
    }
  }
  if (table.rows.empty()) return std::nullopt;
  return ReportSection{
      "Bytes by layer",
      "From each run's layers.csv (output.layer_stats_every_steps, rank 0): the layers that carry most of what a "
      "configuration sends, largest first, down to 90% of its bytes or 5 layers; KiB per step and the relative "
      "compression error (‖memory‖ / ‖send‖) are means over the sampled steps and the seeds.",
      std::move(table)};
}

}  // namespace gcrun::outputs
