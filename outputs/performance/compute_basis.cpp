#include "outputs/performance/compute_basis.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "outputs/statistics.h"

namespace gcrun::performance {
namespace {

constexpr double kMinComputeMismatch = 0.1;

double computeOnlyUs(const StepProgram& program) {
  double total = 0;
  for (const auto& item : program.items) {
    if (item.kind == StepItem::Kind::compute && item.part == StepItem::Part::compute) total += item.us;
  }
  return total;
}

}  // namespace

// Runs are compared when they train the same thing the same way, whatever their reducer.
std::string comparisonOf(const outputs::RunData& run) {
  std::string key;
  for (const auto& [name, value] : run.settings) {
    if (name.rfind("task.", 0) == 0 || name == "training.batch_size") key += name + "=" + value + "\n";
  }
  return key;
}

std::string baseName(const std::string& dir) {
  std::string trimmed = dir;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  const auto slash = trimmed.rfind('/');
  return slash == std::string::npos ? trimmed : trimmed.substr(slash + 1);
}

std::vector<double> computeMsOfSteps(const RunTimeline& timeline) {
  std::vector<double> ms;
  for (const auto& programs : kindsOf(commonSteps(timeline), timeline.schedule).local) {
    ms.push_back(computeOnlyUs(*programs.front()) / 1000);
  }
  std::sort(ms.begin(), ms.end());
  return ms;
}

double relativeSpread(const std::vector<double>& sorted) {
  if (sorted.size() < 2) return 0;
  const double middle = sorted[sorted.size() / 2];
  const double spread = (sorted[(3 * sorted.size()) / 4] - sorted[sorted.size() / 4]) / 2;
  return middle > 0 ? spread / middle : 0;
}

RunTimeline computingAlike(const RunTimeline& timeline, double ms) {
  RunTimeline alike = timeline;
  for (auto& worker : alike.workers) {
    for (auto& program : worker) {
      const double own_us = computeOnlyUs(program);
      if (own_us <= 0) continue;
      for (auto& item : program.items) {
        if (item.kind == StepItem::Kind::compute && item.part == StepItem::Part::compute) item.us *= 1000 * ms / own_us;
      }
    }
  }
  return alike;
}

bool sharesCompute(const ComputeBasis& compute) { return compute.ms_per_batch > 0 && !compute.codec_too; }

ComputeReplay computeReplay(const RunTimeline& timeline, const ComputeBasis& compute) {
  ComputeReplay replay;
  if (sharesCompute(compute)) {
    replay.alike = computingAlike(timeline, compute.ms_per_batch);
    return replay;
  }
  if (compute.ms_per_batch <= 0) return replay;
  const auto steps_ms = computeMsOfSteps(timeline);
  const double measured_ms = outputs::median(steps_ms);
  if (measured_ms <= 0) return replay;
  const double scale = compute.ms_per_batch / measured_ms;
  replay.scale = {scale, compute.codec_too ? scale : 1};
  return replay;
}

std::vector<ComputeBasis> computeBases(const std::vector<outputs::RunData>& runs,
                                       const std::vector<RunTimeline>& timelines, const ComputeChoice& choice) {
  std::vector<ComputeBasis> bases(runs.size());
  if (choice.compute_ms_per_batch > 0) {
    for (auto& basis : bases) basis = {choice.compute_ms_per_batch, true};
    return bases;
  }
  if (!choice.shared_compute) return bases;
  std::map<std::string, std::vector<double>> own_ms;
  for (size_t i = 0; i < runs.size(); ++i) {
    own_ms[comparisonOf(runs[i])].push_back(outputs::median(computeMsOfSteps(timelines[i])));
  }
  // A run alone in its comparison has none to compute alike with: its own steps stand.
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& group = own_ms[comparisonOf(runs[i])];
    if (group.size() > 1) bases[i] = {outputs::median(group), false};
  }
  return bases;
}

ReplayedRuns replayedRuns(const std::vector<RunTimeline>& timelines, std::vector<ComputeBasis> bases) {
  if (timelines.size() != bases.size()) throw std::invalid_argument("replayedRuns: one compute basis per run");
  ReplayedRuns replayed;
  for (size_t i = 0; i < timelines.size(); ++i) {
    const bool shared = sharesCompute(bases[i]);
    replayed.timelines.push_back(shared ? computingAlike(timelines[i], bases[i].ms_per_batch) : timelines[i]);
    replayed.left.push_back(shared ? ComputeBasis{} : bases[i]);
  }
  replayed.bases = std::move(bases);
  return replayed;
}

std::vector<std::string> computeMismatches(const std::vector<outputs::RunData>& runs,
                                           const std::vector<RunTimeline>& timelines) {
  struct Own {
    size_t run;
    double ms, spread;
  };
  std::map<std::string, std::vector<Own>> groups;
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto steps = computeMsOfSteps(timelines[i]);
    groups[comparisonOf(runs[i])].push_back({i, outputs::median(steps), relativeSpread(steps)});
  }
  std::vector<std::string> lines;
  for (auto& [comparison, owns] : groups) {
    if (owns.size() < 2) continue;
    const auto [fastest, slowest] =
        std::minmax_element(owns.begin(), owns.end(), [](const Own& a, const Own& b) { return a.ms < b.ms; });
    // Beyond the noise: twice the steps' own spread, and at least 10%.
    const double tolerance = std::max(kMinComputeMismatch, 2 * std::max(fastest->spread, slowest->spread));
    if (fastest->ms <= 0 || slowest->ms / fastest->ms - 1 <= tolerance) continue;
    std::vector<double> all;
    for (const auto& own : owns) all.push_back(own.ms);
    char line[512];
    std::snprintf(line, sizeof line,
                  "%s computed a step in %.1f ms and %s in %.1f ms, though they train the same model on the same "
                  "batch (a busy machine during one?): both are predicted with the median, %.1f ms",
                  baseName(runs[slowest->run].dir).c_str(), slowest->ms, baseName(runs[fastest->run].dir).c_str(),
                  fastest->ms, outputs::median(all));
    lines.push_back(line);
  }
  return lines;
}

}  // namespace gcrun::performance
