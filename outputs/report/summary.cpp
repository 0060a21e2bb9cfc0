#include "outputs/report/summary.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <spdlog/fmt/fmt.h>

#include "outputs/json.h"
#include "outputs/report/safe_text.h"

namespace gcrun::outputs {
namespace {

// Keys every run has its own value of, or that only describe the run.
bool describesOnly(const std::string& key) {
  return key == "seed" || key == "description" || key.rfind("paper.", 0) == 0 || key.rfind("output.", 0) == 0;
}

std::string statusOf(const std::vector<const RunData*>& runs) {
  std::map<std::string, int> counts;
  for (const auto* run : runs) ++counts[run->status];
  std::string out;
  for (const char* status : {"completed", "running", "interrupted", "failed"}) {
    if (counts.count(status) == 0) continue;
    out += (out.empty() ? "" : ", ") + std::to_string(counts[status]) + " " + status;
    counts.erase(status);
  }
  for (const auto& kv : counts) out += (out.empty() ? "" : ", ") + std::to_string(kv.second) + " " + kv.first;
  return out;
}

std::string number(double value, int digits = 4) { return fmt::format("{:.{}g}", value, digits); }

// A metric in percent when it is a fraction (accuracy), else as it is (perplexity).
bool isFraction(const std::string& metric) { return metric.find("accuracy") != std::string::npos; }

std::string formatMetric(const std::string& metric, double value) {
  return isFraction(metric) ? fmt::format("{:.2f}%", 100 * value) : number(value);
}

}  // namespace

Spread spreadOf(const std::vector<double>& values) {
  Spread s;
  s.count = values.size();
  if (values.empty()) return s;
  s.min = *std::min_element(values.begin(), values.end());
  s.max = *std::max_element(values.begin(), values.end());
  for (double v : values) s.mean += v / static_cast<double>(values.size());
  if (values.size() > 1) {
    double squares = 0;
    for (double v : values) squares += (v - s.mean) * (v - s.mean);
    s.std = std::sqrt(squares / static_cast<double>(values.size() - 1));
  }
  return s;
}

std::vector<ConfigGroup> groupRuns(const std::vector<RunData>& runs) {
  std::vector<ConfigGroup> groups;
  std::map<std::string, size_t> index;
  for (const auto& run : runs) {
    const auto [it, added] = index.emplace(run.config_key, groups.size());
    if (added) groups.emplace_back();
    groups[it->second].runs.push_back(&run);
  }
  // The keys whose values differ between configurations (a key one lacks counts as differing).
  std::set<std::string> varying;
  for (const auto& group : groups) {
    for (const auto& kv : group.runs.front()->settings) {
      if (describesOnly(kv.first)) continue;
      for (const auto& other : groups) {
        const auto& settings = other.runs.front()->settings;
        const auto found = settings.find(kv.first);
        if (found == settings.end() || found->second != kv.second) varying.insert(kv.first);
      }
    }
  }
  for (auto& group : groups) {
    std::sort(group.runs.begin(), group.runs.end(),
              [](const RunData* a, const RunData* b) { return a->seed < b->seed; });
    const RunData& first = *group.runs.front();
    group.name = first.name;
    for (const auto* run : group.runs) {
      if (run->name != first.name) group.name = first.experiment;
    }
    const auto reducer = first.settings.find("reducer.name");
    group.reducer = reducer == first.settings.end() ? "" : reducer->second;
    for (const auto& key : varying) {
      const auto found = first.settings.find(key);
      if (found == first.settings.end()) continue;
      group.settings += (group.settings.empty() ? "" : " ") + key + "=" + found->second;
    }
    group.metric = first.metric;
    group.paper_value = first.paper_value;
    group.paper_source = first.paper_source;
    group.status = statusOf(group.runs);
    group.workers = first.world_size;
    group.simulated_workers = first.simulated_workers;
    std::vector<double> finals, times, mibs, ratios, computes;
    for (const auto* run : group.runs) {
      if (run->status != "completed") continue;
      if (run->final_value) finals.push_back(*run->final_value);
      if (run->time_per_batch_ms) times.push_back(*run->time_per_batch_ms);
      mibs.push_back(run->mib_per_epoch);
      ratios.push_back(run->compression);
      computes.push_back(run->compute_per_batch_ms);
    }
    group.compute_per_batch_ms = spreadOf(computes).mean;
    group.final_metric = spreadOf(finals);
    if (!times.empty()) group.time_per_batch_ms = spreadOf(times).mean;
    group.mib_per_epoch = spreadOf(mibs).mean;
    group.compression = spreadOf(ratios).mean;
  }
  return groups;
}

TextTable resultTable(const std::vector<ConfigGroup>& groups) {
  TextTable table;
  table.header = {"configuration",
                  "reducer",
                  "settings",
                  "workers",
                  "seeds",
                  "final metric: mean ± std (min–max)",
                  "time/batch (median)",
                  "MiB/epoch per worker",
                  "compression vs exact",
                  "paper",
                  "difference"};
  for (const auto& g : groups) {
    const auto& m = g.final_metric;
    std::string metric = "—";
    if (m.count > 0) {
      metric = fmt::format("{} {} ± {} ({}–{})", g.metric, formatMetric(g.metric, m.mean),
                           isFraction(g.metric) ? fmt::format("{:.2f}%", 100 * m.std) : number(m.std),
                           formatMetric(g.metric, m.min), formatMetric(g.metric, m.max));
    }
    std::string paper = "—", difference = "—";
    if (g.paper_value) {
      paper = formatMetric(g.metric, *g.paper_value) + (g.paper_source.empty() ? "" : " (" + g.paper_source + ")");
      if (m.count > 0) {
        const double d = m.mean - *g.paper_value;
        difference = isFraction(g.metric) ? fmt::format("{:+.2f} points", 100 * d) : fmt::format("{:+.4g}", d);
      }
    }
    std::string time = g.time_per_batch_ms ? fmt::format("{:.1f} ms", *g.time_per_batch_ms) : "—";
    std::string workers = std::to_string(g.workers);
    if (g.simulated_workers > 1) {
      workers += fmt::format(" ({} simulated per process)", g.simulated_workers);
      // Their compute ran in turn on one device: the step is W forward/backward passes long.
      if (g.time_per_batch_ms)
        time += fmt::format(" (serialized; {:.1f} ms compute per worker)", g.compute_per_batch_ms);
    }
    table.rows.push_back({g.name, g.reducer, g.settings.empty() ? "—" : g.settings, workers,
                          fmt::format("{} ({})", m.count, g.status), metric, time,
                          m.count > 0 ? number(g.mib_per_epoch) : "—",
                          g.compression > 0 ? fmt::format("{:.3g}×", g.compression) : "—", paper, difference});
  }
  return table;
}

std::string markdownTable(const TextTable& table) {
  const auto row = [](const std::vector<std::string>& cells) {
    std::string out = "|";
    for (const auto& cell : cells) {
      out += " " + markdownText(cell) + " |";
    }
    return out + "\n";
  };
  std::string out = row(table.header) + "|";
  for (size_t i = 0; i < table.header.size(); ++i) out += "---|";
  out += "\n";
  for (const auto& cells : table.rows) out += row(cells);
  return out;
}

std::string csvTable(const std::vector<ConfigGroup>& groups) {
  std::string out =
      "configuration,reducer,settings,workers,simulated_workers,seeds,status,metric,mean,std,min,max,"
      "time_per_batch_ms,compute_per_batch_ms,mib_per_epoch,compression,paper_value,paper_difference,paper_source\n";
  const auto opt = [](const std::optional<double>& v) { return v ? jsonNumber(*v) : std::string(); };
  for (const auto& g : groups) {
    const auto& m = g.final_metric;
    const bool measured = m.count > 0;
    out += csvText(g.name) + "," + csvText(g.reducer) + "," + csvText(g.settings) + "," + std::to_string(g.workers) +
           "," + std::to_string(g.simulated_workers) + "," + std::to_string(m.count) + "," + csvText(g.status) + "," +
           csvText(g.metric) + "," + (measured ? jsonNumber(m.mean) : "") + "," + (measured ? jsonNumber(m.std) : "") +
           "," + (measured ? jsonNumber(m.min) : "") + "," + (measured ? jsonNumber(m.max) : "") + "," +
           opt(g.time_per_batch_ms) + "," + (g.simulated_workers > 1 ? jsonNumber(g.compute_per_batch_ms) : "") + "," +
           (measured ? jsonNumber(g.mib_per_epoch) : "") + "," + (g.compression > 0 ? jsonNumber(g.compression) : "") +
           "," + opt(g.paper_value) + "," + (g.paper_value && measured ? jsonNumber(m.mean - *g.paper_value) : "") +
           "," + csvText(g.paper_source) + "\n";
  }
  return out;
}

}  // namespace gcrun::outputs
