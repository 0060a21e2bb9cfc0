#include "outputs/progress/progress_line.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <utility>

#include <spdlog/fmt/fmt.h>

#include "hyperparams/base/units.h"
#include "outputs/progress/terminal.h"

namespace gcrun::outputs {
namespace {

double steadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

ProgressLine::Output standardError() {
  return {&std::cerr, isTerminal(STDERR_FILENO), steadySeconds, terminalColumns(STDERR_FILENO)};
}

}  // namespace

ProgressLine::ProgressLine(std::string what, int64_t total, std::string units)
    : ProgressLine(std::move(what), total, std::move(units), standardError()) {}

ProgressLine::ProgressLine(std::string what, int64_t total, std::string units, Output output)
    : what_(std::move(what)),
      units_(std::move(units)),
      total_(total),
      output_(std::move(output)),
      started_s_(output_.now_s()) {}

ProgressLine::~ProgressLine() { finish(); }

void ProgressLine::update(int64_t done, int64_t total) {
  done_ = done;
  total_ = total;
  if (!output_.terminal || finished_) return;
  const double now = output_.now_s();
  if (now - (drawn_ ? drawn_s_ : started_s_) < kIntervalS) return;
  std::string text = progressText(what_, done_, total_, units_, now - started_s_);
  // One row: a wrapped line would leave its first rows behind at each redraw.
  if (static_cast<int>(text.size()) >= output_.columns) text.resize(std::max(0, output_.columns - 1));
  redrawLine(*output_.stream, text);
  drawn_ = true;
  drawn_s_ = now;
}

void ProgressLine::finish() {
  if (finished_) return;
  finished_ = true;
  if (drawn_) clearLine(*output_.stream);
}

std::string progressText(const std::string& what, int64_t done, int64_t total, const std::string& units,
                         double elapsed_s) {
  const double rate = elapsed_s > 0 ? static_cast<double>(done) / elapsed_s : 0;
  if (total <= 0) return fmt::format("{}: {} {}, {:.3g} {}/s", what, done, units, rate, units);
  std::string text = fmt::format("{}: {}/{} {} ({:.0f}%), {:.3g} {}/s", what, done, total, units,
                                 100.0 * static_cast<double>(done) / static_cast<double>(total), rate, units);
  // Assumes the remaining units go as fast as the ones done.
  if (rate > 0 && done < total) text += ", ETA " + units::elapsedText(static_cast<double>(total - done) / rate);
  return text;
}

}  // namespace gcrun::outputs
