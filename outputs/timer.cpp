#include "outputs/timer.h"

#include <exception>

#include <spdlog/spdlog.h>

#include "outputs/json_document.h"
#include "outputs/statistics.h"

namespace gcrun::outputs {

Timer::Scope::Scope(Timer& timer, std::string label) : timer_(timer), label_(std::move(label)) {
  timer_.synchronize();
  start_ = std::chrono::steady_clock::now();
}

Timer::Scope::~Scope() {
  // A destructor must not throw; a failing device sync resurfaces at the next device call anyway.
  try {
    timer_.synchronize();
  } catch (const std::exception& e) {
    spdlog::warn("timer '{}': synchronize failed: {}", label_, e.what());
  }
  std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start_;
  timer_.record(label_, elapsed.count());
}

void Timer::record(const std::string& label, double seconds) {
  Stats& stats = stats_[label];
  ++stats.seen;
  stats.last_s = seconds;
  if (stats.seen == 1) return;  // skip_first: the first event pays for warm-up
  ++stats.events;
  stats.total_s += seconds;
  stats.samples.push_back(seconds);
}

std::string Timer::summaryJson() const {
  Json summary = Json::object();
  for (const auto& [label, stats] : stats_) {
    const double average = stats.events > 0 ? stats.total_s / static_cast<double>(stats.events) : 0.0;
    summary[label] = Json{{"label", label},
                          {"average_duration", average},
                          {"median_duration", median(stats.samples)},
                          {"n_events", stats.events},
                          {"total_time", stats.total_s}};
  }
  return jsonText(summary, 1) + "\n";
}

}  // namespace gcrun::outputs
