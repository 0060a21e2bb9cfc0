#include "outputs/planning/plan.h"

#include <cmath>

#include <fmt/format.h>

#include "outputs/csv_field.h"
#include "outputs/files/safe_files.h"
#include "outputs/report/plots.h"
#include "outputs/report/safe_text.h"
#include "outputs/report/summary.h"

namespace gcrun::planning {
namespace {

constexpr double kBitsPerMiB = 8.0 * 1024 * 1024;
constexpr int kPlanPlotPoints = 33;

std::string gbit(double bit_per_s) { return fmt::format("{:.4g}", bit_per_s / 1e9); }

// A CU target's cell: the bandwidth needed, "unreachable", or "≤ 0.001" where the slowest link
// searched already reaches it.
std::string neededCell(const PlanTarget& target) {
  if (!target.bit_per_s) return "unreachable";
  if (*target.bit_per_s <= kLowestBitPerS) return "≤ 0.001";
  return gbit(*target.bit_per_s);
}

outputs::TextTable matrixTable(const Plan& plan) {
  outputs::TextTable table;
  table.header = {"configuration", "workers"};
  for (double cu : plan.cu_targets) table.header.push_back(fmt::format("CU {:g}: Gbit/s", cu));
  for (int workers : plan.workers) {
    for (size_t m = 0; m < plan.methods.size(); ++m) {
      std::vector<std::string> row = {plan.methods[m].configuration, std::to_string(workers)};
      for (const auto& target : plan.targets) {
        if (target.method == m && target.workers == workers) row.push_back(neededCell(target));
      }
      table.rows.push_back(std::move(row));
    }
  }
  return table;
}

outputs::TextTable pointTable(const Plan& plan) {
  outputs::TextTable table;
  table.header = {"configuration", "strategy", "reducer", "H",        "F",        "τ",          "workers",
                  "network",       "ms/step",  "CU",      "MiB/step", "MiB/sync", "avg Gbit/s", "peak Gbit/s"};
  for (const auto& point : plan.points) {
    const auto& m = plan.methods[point.method];
    const auto& e = point.estimate;
    table.rows.push_back(
        {m.configuration, m.strategy, m.reducer, std::to_string(m.sync_every), std::to_string(m.fragments),
         std::to_string(m.delay), std::to_string(point.workers), point.network, fmt::format("{:.4g}", e.step_s * 1e3),
         fmt::format("{:.3f}", e.cu), fmt::format("{:.4g}", e.bits_per_step / kBitsPerMiB),
         fmt::format("{:.4g}", e.bits_per_sync / kBitsPerMiB), gbit(e.average_bit_per_s), gbit(e.peak_bit_per_s)});
  }
  return table;
}

std::string methodFields(const PlannedMethod& m, int workers) {
  return outputs::csvField(m.configuration) + "," + outputs::csvField(m.strategy) + "," + outputs::csvField(m.reducer) +
         "," + fmt::format("{},{},{},{}", m.sync_every, m.fragments, m.delay, workers);
}

// One row per configuration x workers x network, then one per configuration x workers x target.
std::string planCsv(const Plan& plan) {
  std::string csv =
      "configuration,strategy,reducer,sync_every,fragments,delay,workers,network,step_ms,cu,cu_target,"
      "bandwidth_gbit,mib_per_step,mib_per_sync,average_gbit,peak_gbit,bits_per_step,bits_per_sync\n";
  for (const auto& point : plan.points) {
    const auto& e = point.estimate;
    csv += methodFields(plan.methods[point.method], point.workers) + "," + outputs::csvField(point.network) +
           fmt::format(",{:.6g},{:.6g},,,{:.6g},{:.6g},{:.6g},{:.6g},{:.17g},{:.17g}\n", e.step_s * 1e3, e.cu,
                       e.bits_per_step / kBitsPerMiB, e.bits_per_sync / kBitsPerMiB, e.average_bit_per_s / 1e9,
                       e.peak_bit_per_s / 1e9, e.bits_per_step, e.bits_per_sync);
  }
  for (const auto& target : plan.targets) {
    const std::string needed = target.bit_per_s ? fmt::format("{:.6g}", *target.bit_per_s / 1e9) : "unreachable";
    csv += methodFields(plan.methods[target.method], target.workers) +
           fmt::format(",target,{:.6g},{:g},{:g},{},,,,,,\n", plan.compute.step_s / target.cu * 1e3, target.cu,
                       target.cu, needed);
  }
  return csv;
}

// CU against bandwidth (log x) per worker count, one curve per configuration, the CU targets'
// bandwidths marked.
std::vector<outputs::Plot> planPlots(const Plan& plan) {
  std::vector<outputs::Plot> plots;
  for (int workers : plan.workers) {
    outputs::Plot plot{fmt::format("cu-vs-bandwidth-w{}", workers),
                       fmt::format("Compute utilisation at {} workers", workers),
                       "bandwidth (Gbit/s)",
                       "CU",
                       {}};
    plot.log_x = true;
    for (const auto& method : plan.methods) {
      outputs::Curve curve{method.configuration, {}};
      for (int k = 0; k < kPlanPlotPoints; ++k) {
        const double bit_per_s =
            kLowestBitPerS * std::pow(kHighestBitPerS / kLowestBitPerS, double(k) / (kPlanPlotPoints - 1));
        const double cu =
            estimateStep(method, plan.compute, network::linkProfile(bit_per_s / 8, plan.target_latency_s), workers).cu;
        curve.points.push_back({bit_per_s / 1e9, cu, cu, cu});
      }
      plot.curves.push_back(std::move(curve));
    }
    outputs::Curve marks{"CU targets", {}, true};
    for (const auto& target : plan.targets) {
      if (target.workers == workers && target.bit_per_s) {
        marks.points.push_back({*target.bit_per_s / 1e9, target.cu, target.cu, target.cu});
      }
    }
    if (!marks.points.empty()) plot.curves.push_back(std::move(marks));
    plots.push_back(std::move(plot));
  }
  return plots;
}

std::string assumptionsMarkdown(const Plan& plan) {
  std::string md = "## Assumptions\n\n";
  for (const auto& line : plan.assumptions) md += "- " + outputs::markdownText(line) + "\n";
  return md;
}

}  // namespace

void computePlan(Plan& plan, const std::vector<network::NetworkProfile>& networks) {
  for (int workers : plan.workers) {
    for (size_t m = 0; m < plan.methods.size(); ++m) {
      for (const auto& network : networks) {
        plan.points.push_back(
            {m, workers, network.name, estimateStep(plan.methods[m], plan.compute, network, workers)});
      }
      for (double cu : plan.cu_targets) {
        plan.targets.push_back(
            {m, workers, cu, bandwidthFor(cu, plan.methods[m], plan.compute, plan.target_latency_s, workers)});
      }
    }
  }
}

std::string matrixMarkdown(const Plan& plan) {
  return fmt::format("Bandwidth each configuration needs to reach each CU (Gbit/s, links of {:g} us latency):\n\n",
                     plan.target_latency_s * 1e6) +
         outputs::markdownTable(matrixTable(plan));
}

PlanFiles writePlan(const Plan& plan, const std::string& output_dir) {
  const auto dir = files::Directory::open(output_dir, true);
  PlanFiles written;
  const auto rendered = outputs::renderPlots(planPlots(plan), dir.sub("plots", true));
  written.note = rendered.note;
  std::string md = "# gcrun plan: " + outputs::markdownText(plan.title) + "\n\n" + matrixMarkdown(plan) + "\n";
  md += "## Per network\n\n" + outputs::markdownTable(pointTable(plan)) + "\n" + assumptionsMarkdown(plan);
  for (const auto& image : rendered.images) {
    if (image.size() > 4 && image.compare(image.size() - 4, 4, ".png") == 0) {
      const auto name = image.substr(image.rfind('/') + 1);
      md += "\n![" + outputs::markdownText(name) + "](plots/" + name + ")\n";
    }
  }
  dir.writeAtomically("plan.md", md);
  dir.writeAtomically("plan.csv", planCsv(plan));
  written.files = {dir.pathOf("plan.md"), dir.pathOf("plan.csv")};
  written.files.insert(written.files.end(), rendered.images.begin(), rendered.images.end());
  return written;
}

}  // namespace gcrun::planning
