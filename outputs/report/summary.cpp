#include "outputs/report/summary.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include <spdlog/fmt/fmt.h>

#include "outputs/csv_field.h"
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
  for (const auto* run : runs) ++counts[statusLabel(*run)];
  std::string out;
  for (const auto value : {RunStatus::completed, RunStatus::running, RunStatus::interrupted, RunStatus::failed}) {
    const std::string status = runStatusText(value);
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

// The columns only some reports have, each where at least one configuration has a value for it,
// inserted before the paper's columns.
void addOptionalColumns(const std::vector<ConfigGroup>& groups, const std::string& projection_label, TextTable& table) {
  const auto ratio = [](const std::optional<double>& v) { return v ? fmt::format("{:.3g}×", *v) : "—"; };
  const auto ms = [](const std::optional<double>& v) { return v ? fmt::format("{:.1f} ms", *v) : "—"; };
  using Cell = std::function<std::string(const ConfigGroup&)>;
  std::vector<std::pair<std::string, Cell>> columns;
  const auto any = [&](auto has) { return std::any_of(groups.begin(), groups.end(), has); };
  if (any([](const ConfigGroup& g) { return g.compression_vs_fp16.has_value(); })) {
    columns.emplace_back("compression vs fp16", [&](const ConfigGroup& g) { return ratio(g.compression_vs_fp16); });
  }
  if (any([](const ConfigGroup& g) { return g.time_to_target_s.has_value(); })) {
    columns.emplace_back("time to target (measured)", [](const ConfigGroup& g) -> std::string {
      if (!g.time_to_target_s || g.reached_target == 0) return "not reached";
      return fmt::format("{:.1f} s ({} of {} seeds)", g.time_to_target_s->mean, g.reached_target, g.runs.size());
    });
  }
  if (any([](const ConfigGroup& g) { return g.projected_ms_per_batch.has_value(); })) {
    columns.emplace_back("projected time/batch (" + projection_label + ")",
                         [&](const ConfigGroup& g) { return ms(g.projected_ms_per_batch); });
    columns.emplace_back("projected CU", [&](const ConfigGroup& g) {
      return g.projected_cu ? fmt::format("{:.2f}", *g.projected_cu) : "—";
    });
    columns.emplace_back("projected speedup vs exact",
                         [&](const ConfigGroup& g) { return ratio(g.projected_speedup_vs_exact); });
    columns.emplace_back("vs fp16", [&](const ConfigGroup& g) { return ratio(g.projected_speedup_vs_fp16); });
  }
  if (any([](const ConfigGroup& g) { return g.projected_time_to_target_s.has_value(); })) {
    columns.emplace_back("projected time to target", [](const ConfigGroup& g) {
      return g.projected_time_to_target_s ? fmt::format("{:.1f} s", *g.projected_time_to_target_s) : "—";
    });
  }
  if (any([](const ConfigGroup& g) { return g.paper_time_per_batch_ms.has_value(); })) {
    columns.emplace_back("paper time/batch (16 workers)",
                         [&](const ConfigGroup& g) { return ms(g.paper_time_per_batch_ms); });
  }
  const size_t at = table.header.size() - 2;  // before "paper" and "difference"
  for (size_t c = 0; c < columns.size(); ++c) {
    table.header.insert(table.header.begin() + static_cast<long>(at + c), columns[c].first);
    for (size_t r = 0; r < groups.size(); ++r) {
      table.rows[r].insert(table.rows[r].begin() + static_cast<long>(at + c), columns[c].second(groups[r]));
    }
  }
}

// The keys whose values tell configurations apart: those two configurations both have with
// different values. A key some lack is no difference by itself: a reducer's or strategy's own
// settings, which only its rows have, show where two of its rows differ in them (the reducer and
// strategy names themselves tell the rest).
std::set<std::string> keysThatTellApart(const std::vector<ConfigGroup>& groups) {
  std::set<std::string> varying;
  for (const auto& group : groups) {
    const RunData& run = *group.runs.front();
    for (const auto& kv : run.settings) {
      if (describesOnly(kv.first)) continue;
      for (const auto& other : groups) {
        const auto& settings = other.runs.front()->settings;
        const auto found = settings.find(kv.first);
        if (found != settings.end() && found->second != kv.second) varying.insert(kv.first);
      }
    }
  }
  return varying;
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
  const std::set<std::string> varying = keysThatTellApart(groups);
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
    group.baseline = first.baseline;
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
      if (run->status != RunStatus::completed) continue;
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

void annotateGroups(std::vector<ConfigGroup>& groups, const Target* target, const ReportProjection* projection) {
  const auto fp16 = std::find_if(groups.begin(), groups.end(),
                                 [](const ConfigGroup& g) { return g.baseline == Baseline::half_precision; });
  const double fp16_mib = fp16 == groups.end() ? 0 : fp16->mib_per_epoch;
  for (auto& group : groups) {
    if (fp16_mib > 0 && group.mib_per_epoch > 0) group.compression_vs_fp16 = fp16_mib / group.mib_per_epoch;
    group.paper_time_per_batch_ms = group.runs.front()->paper_time_per_batch_ms;
    std::vector<double> seconds, steps, projected, cu, vs_exact, vs_fp16;
    for (const auto* run : group.runs) {
      const auto hit = target ? reachedAt(*run, *target) : std::nullopt;
      if (hit) {
        seconds.push_back(hit->elapsed_s);
        steps.push_back(static_cast<double>(hit->step));
      }
      const auto found =
          projection ? projection->by_dir.find(run->dir) : std::map<std::string, RunProjection>::const_iterator();
      if (!projection || found == projection->by_dir.end()) continue;
      projected.push_back(found->second.ms_per_batch);
      cu.push_back(found->second.cu);
      if (found->second.speedup_vs_exact) vs_exact.push_back(*found->second.speedup_vs_exact);
      if (found->second.speedup_vs_fp16) vs_fp16.push_back(*found->second.speedup_vs_fp16);
    }
    group.reached_target = seconds.size();
    if (target) group.time_to_target_s = spreadOf(seconds);
    const auto meanOf = [](const std::vector<double>& values) {
      return values.empty() ? std::nullopt : std::optional<double>(spreadOf(values).mean);
    };
    group.projected_ms_per_batch = meanOf(projected);
    group.projected_cu = meanOf(cu);
    group.projected_speedup_vs_exact = meanOf(vs_exact);
    group.projected_speedup_vs_fp16 = meanOf(vs_fp16);
    if (group.projected_ms_per_batch && !steps.empty()) {
      group.projected_time_to_target_s = spreadOf(steps).mean * *group.projected_ms_per_batch / 1000;
    }
  }
}

std::string findingLine(const std::vector<ConfigGroup>& groups) {
  const auto exact = std::find_if(groups.begin(), groups.end(), [](const ConfigGroup& g) {
    return g.baseline == Baseline::full_precision && g.final_metric.count > 0 && g.mib_per_epoch > 0;
  });
  if (exact == groups.end()) return "";
  const bool fraction = isFraction(exact->metric);
  const bool lower_is_better = !fraction;  // a loss or a perplexity
  const double tolerance = fraction ? 0.01 : 0.01 * std::abs(exact->final_metric.mean);
  // How much worse than exact (positive: worse), in the metric's own units.
  const auto shortfall = [&](const ConfigGroup& g) {
    const double d = g.final_metric.mean - exact->final_metric.mean;
    return lower_is_better ? d : -d;
  };
  const ConfigGroup* within = nullptr;
  const ConfigGroup* best = nullptr;
  for (const auto& g : groups) {
    if (&g == &*exact || g.final_metric.count == 0 || g.metric != exact->metric || g.mib_per_epoch <= 0) continue;
    if (shortfall(g) <= tolerance && (!within || g.mib_per_epoch < within->mib_per_epoch)) within = &g;
    if (!best || shortfall(g) < shortfall(*best)) best = &g;
  }
  const ConfigGroup* chosen = within ? within : best;
  if (!chosen) return "";
  const double gap = shortfall(*chosen);
  const std::string distance = fraction ? fmt::format("{:.1f} points", 100 * std::abs(gap)) : number(std::abs(gap));
  const std::string where = gap <= 0 ? "at least as good as"
                            : within ? "within " + distance + " of"
                                     : distance + " behind";
  return fmt::format("{} is {} {} ({}) at 1/{:.3g} of the data.", chosen->name, where, exact->name, exact->metric,
                     exact->mib_per_epoch / chosen->mib_per_epoch);
}

TextTable resultTable(const std::vector<ConfigGroup>& groups, const std::string& projection_label) {
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
  addOptionalColumns(groups, projection_label, table);
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
      "time_per_batch_ms,compute_per_batch_ms,mib_per_epoch,compression,paper_value,paper_difference,paper_source,"
      "compression_vs_fp16,time_to_target_s,reached_target,projected_ms_per_batch,projected_speedup_vs_exact,"
      "projected_speedup_vs_fp16,projected_time_to_target_s,paper_time_per_batch_ms,projected_cu\n";
  const auto opt = [](const std::optional<double>& v) { return v ? jsonNumber(*v) : std::string(); };
  for (const auto& g : groups) {
    const auto& m = g.final_metric;
    const bool measured = m.count > 0;
    out += csvField(g.name) + "," + csvField(g.reducer) + "," + csvField(g.settings) + "," + std::to_string(g.workers) +
           "," + std::to_string(g.simulated_workers) + "," + std::to_string(m.count) + "," + csvField(g.status) + "," +
           csvField(g.metric) + "," + (measured ? jsonNumber(m.mean) : "") + "," + (measured ? jsonNumber(m.std) : "") +
           "," + (measured ? jsonNumber(m.min) : "") + "," + (measured ? jsonNumber(m.max) : "") + "," +
           opt(g.time_per_batch_ms) + "," + (g.simulated_workers > 1 ? jsonNumber(g.compute_per_batch_ms) : "") + "," +
           (measured ? jsonNumber(g.mib_per_epoch) : "") + "," + (g.compression > 0 ? jsonNumber(g.compression) : "") +
           "," + opt(g.paper_value) + "," + (g.paper_value && measured ? jsonNumber(m.mean - *g.paper_value) : "") +
           "," + csvField(g.paper_source) + "," + opt(g.compression_vs_fp16) + "," +
           (g.time_to_target_s && g.reached_target > 0 ? jsonNumber(g.time_to_target_s->mean) : "") + "," +
           (g.time_to_target_s ? std::to_string(g.reached_target) : "") + "," + opt(g.projected_ms_per_batch) + "," +
           opt(g.projected_speedup_vs_exact) + "," + opt(g.projected_speedup_vs_fp16) + "," +
           opt(g.projected_time_to_target_s) + "," + opt(g.paper_time_per_batch_ms) + "," + opt(g.projected_cu) + "\n";
  }
  return out;
}

}  // namespace gcrun::outputs
