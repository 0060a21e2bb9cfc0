#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

namespace gcrun::outputs {

// The progress of one long wait (an evaluation, a conversion, a calibration), for the person
// waiting: on a terminal, one line on stderr redrawn in place at most every few seconds and cleared
// when the work ends, and nothing at all for a wait shorter than that; not on a terminal (a log, a
// pipe, a batch job), nothing, so that logs and captured output stay as they were. stderr rather
// than stdout: a run's stdout may be kept (`> run.log`) while the person watches the terminal, and
// a line redrawn with "\r" is no use in a file.
//
//   ProgressLine line("evaluating validation", batches, "batches");
//   for (...) { ...; line.advance(); }
//   line.finish();  // or let it go out of scope
class ProgressLine {
 public:
  // What a test injects in place of stderr, its terminal check and the steady clock.
  struct Output {
    std::ostream* stream = nullptr;
    bool terminal = false;
    std::function<double()> now_s;  // seconds on a monotonic clock
    int columns = 80;
  };
  // The first line waits this long after the start, and the next ones as long after the last.
  static constexpr double kIntervalS = 2.5;

  // `total` in `units` ("windows", "files"); 0 when not known yet (no percent or ETA then).
  ProgressLine(std::string what, int64_t total, std::string units);
  ProgressLine(std::string what, int64_t total, std::string units, Output output);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  void advance(int64_t units = 1) { update(done_ + units, total_); }
  // `done` of `total` units now (a total learnt on the way, or revised).
  void update(int64_t done, int64_t total);
  // The work ended: the line, if one was drawn, is cleared. Later calls do nothing.
  void finish();

 private:
  std::string what_;
  std::string units_;
  int64_t total_;
  int64_t done_ = 0;
  Output output_;
  double started_s_;
  double drawn_s_ = 0;
  bool drawn_ = false;
  bool finished_ = false;
};

// The line's text: "evaluating validation: 1200/5000 batches (24%), 480 batches/s, ETA 8s"; without
// a total, "converting: 1200 files, 480 files/s".
std::string progressText(const std::string& what, int64_t done, int64_t total, const std::string& units,
                         double elapsed_s);

}  // namespace gcrun::outputs
