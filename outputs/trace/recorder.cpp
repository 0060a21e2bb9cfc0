#include "outputs/trace/recorder.h"

#include <algorithm>
#include <exception>

#include <spdlog/spdlog.h>

#include "outputs/trace/trace_file.h"

namespace gcrun::trace {

WorkerTrace::Span::~Span() {
  if (trace_) trace_->end(name_, start_us_);
}

void WorkerTrace::setStep(int64_t step) {
  step_.store(step, std::memory_order_relaxed);
  recording_.store(recorder_.window() && recorder_.window()->contains(step), std::memory_order_relaxed);
}

double WorkerTrace::now() const { return recorder_.now(); }

bool WorkerTrace::stopped() const { return recorder_.truncated(); }

void WorkerTrace::end(const char* name, double start_us) {
  const double end_us = now();
  if (!recorder_.reserve(kEventsPerSpan)) return;
  timeline_.spans.push_back({name, step(), start_us, end_us - start_us});
  if (name == kReduce) addCodecSpans(start_us, end_us);  // the same pointer: only reduce()'s span
}

void WorkerTrace::clearCommBusy() {
  std::lock_guard<std::mutex> lock(collectives_mutex_);
  comm_busy_.clear();
}

void WorkerTrace::addCodecSpans(double start_us, double end_us) {
  std::lock_guard<std::mutex> lock(collectives_mutex_);
  std::sort(comm_busy_.begin(), comm_busy_.end());
  double free_from = start_us;
  auto addUntil = [&](double until) {
    until = std::min(until, end_us);
    if (until > free_from && recorder_.reserve(kEventsPerSpan)) {
      timeline_.spans.push_back({"codec", step(), free_from, until - free_from});
    }
  };
  for (const auto& [busy_start, busy_end] : comm_busy_) {
    addUntil(busy_start);
    free_from = std::max(free_from, busy_end);
  }
  addUntil(end_us);
  comm_busy_.clear();
}

std::optional<size_t> WorkerTrace::issued(Collective collective, double call_end_us) {
  if (!recording() || !recorder_.reserve(kEventsPerCollective)) return std::nullopt;
  collective.step = step();
  std::lock_guard<std::mutex> lock(collectives_mutex_);
  comm_busy_.emplace_back(collective.issued_us, call_end_us);
  timeline_.collectives.push_back(std::move(collective));
  return timeline_.collectives.size() - 1;
}

void WorkerTrace::waited(size_t index, double wait_us, double done_us) {
  std::lock_guard<std::mutex> lock(collectives_mutex_);
  auto& collective = timeline_.collectives.at(index);
  collective.wait_us = wait_us;
  collective.done_us = done_us;
  if (collective.async) comm_busy_.emplace_back(wait_us, done_us);
}

// Not among the reduce's busy times: the worker did not wait for it there.
void WorkerTrace::background(Collective collective) {
  if (!recording() || !recorder_.reserve(kEventsPerCollective)) return;
  collective.background = true;
  std::lock_guard<std::mutex> lock(collectives_mutex_);
  timeline_.collectives.push_back(std::move(collective));
}

Recorder::Recorder(Options options) : options_(std::move(options)) {}

WorkerTrace& Recorder::worker(int worker) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& trace : workers_) {
    if (trace->timeline().worker == worker) return *trace;
  }
  workers_.push_back(std::make_unique<WorkerTrace>(*this, worker));
  return *workers_.back();
}

bool Recorder::reserve(int64_t events) {
  if (events_.fetch_add(events, std::memory_order_relaxed) + events <= options_.max_events) return true;
  if (!truncated_.exchange(true)) {
    spdlog::warn("output.trace: the trace reached its bound of {} events; the rest of the window is not recorded",
                 options_.max_events);
  }
  return false;
}

ProcessTimeline Recorder::timeline() const {
  ProcessTimeline timeline{
      options_.rank, options_.world_size, options_.reducer, options_.summable, options_.backend, truncated(), {}};
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& trace : workers_) timeline.workers.push_back(trace->timeline());
  std::sort(timeline.workers.begin(), timeline.workers.end(),
            [](const WorkerTimeline& a, const WorkerTimeline& b) { return a.worker < b.worker; });
  return timeline;
}

void Recorder::setRunDirectory(const std::string& run_dir) {
  std::lock_guard<std::mutex> lock(mutex_);
  run_dir_ = run_dir;
}

void Recorder::writeFile() const {
  std::string run_dir;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    run_dir = run_dir_;
  }
  if (!enabled() || run_dir.empty()) return;
  try {
    writeTraceFile(run_dir, timeline());
  } catch (const std::exception& e) {
    spdlog::warn("output.trace: the trace file was not written: {}", e.what());
  }
}

}  // namespace gcrun::trace
