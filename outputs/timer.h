#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace gcrun::outputs {

// Wall-clock timer by label, summarised in the reference's timer_summary.json format:
// {label: {label, average_duration, n_events, total_time}}, plus median_duration. Like the
// reference's Timer with skip_first, the first event of each label (warm-up, allocation) is left
// out of the summary.
// A synchronize hook (cuda synchronize on GPU runs) runs at both ends of every scope, so that
// asynchronous device work is charged to the scope that launched it.
class Timer {
 public:
  class Scope {
   public:
    Scope(Timer& timer, std::string label);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Timer& timer_;
    std::string label_;
    std::chrono::steady_clock::time_point start_;
  };

  void setSynchronize(std::function<void()> synchronize) { synchronize_ = std::move(synchronize); }
  Scope scope(std::string label) { return Scope(*this, std::move(label)); }
  void record(const std::string& label, double seconds);

  struct Stats {
    double total_s = 0;
    int64_t events = 0;  // counted in the summary (the first is skipped)
    int64_t seen = 0;    // including the skipped first
    double last_s = 0;
    std::vector<double> samples;  // the counted events' durations, for the median
  };
  const std::map<std::string, Stats>& stats() const { return stats_; }
  std::string summaryJson() const;

 private:
  void synchronize() const {
    if (synchronize_) synchronize_();
  }
  std::function<void()> synchronize_;
  std::map<std::string, Stats> stats_;
};

}  // namespace gcrun::outputs
