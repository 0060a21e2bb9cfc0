#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hyperparams/config.h"
#include "outputs/trace/timeline.h"

namespace gcrun::trace {

class Recorder;

// One logical worker's recording (timeline.h), used from that worker's thread, and for
// background() from one thread of its besides (its collectives are guarded). Outside the
// recorder's window of steps, and once the recorder's bound is reached, it records nothing and
// reads no clock: a run without output.trace pays one comparison per span.
class WorkerTrace {
 public:
  // A span from its construction to its end; empty (recording nothing) when the worker was not
  // recording as it began. Returned as a prvalue, it is never copied or moved.
  class Span {
   public:
    Span(const Span&) = delete;
    Span& operator=(const Span&) = delete;
    ~Span();

   private:
    friend class WorkerTrace;
    Span(WorkerTrace* trace, const char* name, double start_us) : trace_(trace), name_(name), start_us_(start_us) {}
    WorkerTrace* trace_;
    const char* name_;
    double start_us_;
  };

  WorkerTrace(Recorder& recorder, int worker) : recorder_(recorder) { timeline_.worker = worker; }

  // What is recorded from now on belongs to `step` (1-based; an evaluation: the step it follows).
  void setStep(int64_t step);
  bool recording() const { return recording_.load(std::memory_order_relaxed) && !stopped(); }
  int64_t step() const { return step_.load(std::memory_order_relaxed); }
  // Microseconds since the recorder's origin.
  double now() const;

  // A phase named as in timeline.h; `when` false: nothing is recorded.
  Span span(const char* name, bool when = true) {
    return Span(when && recording() ? this : nullptr, name, when && recording() ? now() : 0);
  }
  // The "reduce" span. As it ends, its time outside the collective calls and waits recorded
  // meanwhile becomes "codec" spans: the reducer's own encode and decode.
  Span reduce() {
    clearCommBusy();
    return span(kReduce);
  }

  // A collective this worker issued: its index for waited(), or nothing when it is not recorded.
  // `call_end_us`: when the issuing call returned (for a blocking call, when it was done).
  std::optional<size_t> issued(Collective collective, double call_end_us);
  // The wait for collective `index` ran from `wait_us` to `done_us`.
  void waited(size_t index, double wait_us, double done_us);
  // A collective the worker's background thread ran from its issue to its end, for the step
  // `collective.step` (Collective::background).
  void background(Collective collective);

  // Once the worker's threads are done.
  const WorkerTimeline& timeline() const { return timeline_; }

 private:
  static constexpr const char* kReduce = "reduce";

  bool stopped() const;
  void end(const char* name, double start_us);
  void addCodecSpans(double start_us, double end_us);
  void clearCommBusy();

  Recorder& recorder_;
  WorkerTimeline timeline_;
  // Set by the worker's thread, read by its background thread too.
  std::atomic<int64_t> step_{0};
  std::atomic<bool> recording_{false};
  // Guards timeline_.collectives and comm_busy_, which both threads write.
  std::mutex collectives_mutex_;
  // This step's collective calls and waits, [start, end] in microseconds.
  std::vector<std::pair<double, double>> comm_busy_;
};

// The process's recorder: one WorkerTrace per logical worker (simulated workers are threads),
// all timed from one origin, with at most `max_events` trace events (trace_file.h) in all. Past
// the bound nothing more is recorded, the timeline is marked truncated, and a warning says so once.
class Recorder {
 public:
  static constexpr int64_t kDefaultMaxEvents = 400000;

  struct Options {
    std::optional<StepWindow> window;  // nothing: off
    int rank = 0;                      // the process's
    int world_size = 1;                // logical workers in the run
    std::string reducer;
    bool summable = false;  // ProcessTimeline::summable
    std::string backend;
    int64_t max_events = kDefaultMaxEvents;
  };

  explicit Recorder(Options options);

  bool enabled() const { return options_.window.has_value(); }
  const std::optional<StepWindow>& window() const { return options_.window; }
  // Logical worker `worker`'s (global rank) trace, made on first use; thread-safe.
  WorkerTrace& worker(int worker);

  double now() const { return std::chrono::duration<double, std::micro>(Clock::now() - origin_).count(); }
  // Takes `events` from the bound; false (and from then on nothing is recorded) when they do not fit.
  bool reserve(int64_t events);
  bool truncated() const { return truncated_.load(std::memory_order_relaxed); }

  // Everything recorded so far, workers in rank order. Call it once the workers are done.
  ProcessTimeline timeline() const;

  // Where the process's trace file goes (the run directory), set by every worker alike.
  void setRunDirectory(const std::string& run_dir);
  // Writes the trace file into the run directory when tracing is on and one was set; a failure to
  // write is only logged, so that it never hides the run's own outcome.
  void writeFile() const;

 private:
  using Clock = std::chrono::steady_clock;

  Options options_;
  Clock::time_point origin_ = Clock::now();
  std::atomic<int64_t> events_{0};
  std::atomic<bool> truncated_{false};
  mutable std::mutex mutex_;  // guards workers_ and run_dir_
  std::vector<std::unique_ptr<WorkerTrace>> workers_;
  std::string run_dir_;
};

}  // namespace gcrun::trace
