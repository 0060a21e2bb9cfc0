#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include <spdlog/fmt/fmt.h>

#include "hyperparams/base/units.h"
#include "outputs/builtin_sinks.h"
#include "outputs/progress/terminal.h"

namespace gcrun::outputs {
namespace {

constexpr int kMaxBarWidth = 30;
// Columns kept free beside the bar: its brackets, the cursor, and room for the text to grow.
constexpr int kBarSlack = 12;
// A terminal line redrawn more often than this only burns time in the training thread.
constexpr double kRedrawIntervalS = 0.1;

// The metrics every task reports get short names; any other metric is shown by its own name.
std::string formatMetrics(const std::map<std::string, double>& metrics) {
  std::string out;
  for (const char* loss_key : {"loss", "cross_entropy"}) {
    auto it = metrics.find(loss_key);
    if (it == metrics.end()) continue;
    out += fmt::format(" loss {:.4f}", it->second);
    break;
  }
  if (auto it = metrics.find("accuracy"); it != metrics.end()) {
    out += fmt::format(" acc {:.2f}%", 100.0 * it->second);
  }
  for (const auto& [name, value] : metrics) {
    if (name == "accuracy" || name == "cross_entropy" || name == "loss") continue;
    out += fmt::format(" {} {:.4g}", name, value);
  }
  return out;
}

std::string formatBar(double fraction, int width) {
  int filled = static_cast<int>(std::lround(std::clamp(fraction, 0.0, 1.0) * width));
  return "[" + std::string(filled, '#') + std::string(width - filled, '-') + "] ";
}

class ConsoleSink : public MetricSink {
 public:
  explicit ConsoleSink(const SinkContext& context)
      : log_every_steps_(std::max<int64_t>(1, context.config.output.log_every_steps)),
        total_epochs_(context.config.training.epochs),
        synthetic_(context.config.task.synthetic),
        world_size_(context.world_size),
        terminal_(isTerminal(STDOUT_FILENO)) {}

  // Train and test metrics reach the console in the epoch line, and timers only in the files.
  void metric(const MetricEvent& event) override {
    if (event.name == "timer" || !event.split.empty()) return;
    endProgressLine();
    std::cout << fmt::format("{} {:.6g}  (epoch {:.2f}, step {})\n", event.name, event.value, event.epoch, event.step)
              << std::flush;
  }

  void progress(const Progress& progress) override {
    const bool last = progress.total_steps > 0 && progress.step >= progress.total_steps;
    if (terminal_) {
      if (!last && line_open_ && progress.elapsed_s - last_draw_s_ < kRedrawIntervalS) return;
      drawTerminalLine(progress);
    } else if (last || progress.step % log_every_steps_ == 0) {
      std::cout << formatProgressLine(progress, 0) << '\n' << std::flush;
    }
  }

  void epochEnd(const EpochSummary& summary) override {
    endProgressLine();
    std::cout << formatEpochLine(summary, total_epochs_, synthetic_, world_size_) << '\n' << std::flush;
  }

  void close() override { endProgressLine(); }

 private:
  void drawTerminalLine(const Progress& progress) {
    last_draw_s_ = progress.elapsed_s;
    if (!line_open_) {
      // Sized once per line so the bar does not jitter as the text grows ("ETA 9s" -> "ETA 10s").
      const int text_width = static_cast<int>(formatProgressLine(progress, 0).size());
      bar_width_ = std::clamp(terminalColumns(STDOUT_FILENO) - text_width - kBarSlack, 0, kMaxBarWidth);
    }
    redrawLine(std::cout, formatProgressLine(progress, bar_width_));
    line_open_ = true;
  }

  void endProgressLine() {
    if (!line_open_) return;
    clearLine(std::cout);
    line_open_ = false;
  }

  int64_t log_every_steps_;
  int64_t total_epochs_;
  bool synthetic_;
  int world_size_;
  bool terminal_;
  bool line_open_ = false;
  double last_draw_s_ = 0;
  int bar_width_ = 0;
};

}  // namespace

std::string formatProgressLine(const Progress& progress, int bar_width) {
  const bool known_total = progress.total_steps > 0;
  std::string out;
  if (bar_width > 0 && known_total) {
    out += formatBar(static_cast<double>(progress.step) / progress.total_steps, bar_width);
  }
  out += known_total ? fmt::format("step {}/{}", progress.step, progress.total_steps)
                     : fmt::format("step {}", progress.step);
  out += fmt::format("  epoch {}/{}  loss {:.4f}  {:.0f} samples/s", progress.epoch, progress.total_epochs,
                     progress.loss, progress.samples_per_s);
  if (known_total && progress.step > 0) {
    // Assumes the remaining steps go as fast as the ones done, evaluations included.
    double remaining = progress.elapsed_s * (progress.total_steps - progress.step) / progress.step;
    out += "  ETA " + units::elapsedText(remaining);
  }
  return out;
}

std::string sentText(uint64_t bits, int world_size) {
  const std::string mib = units::mibText(units::mibOfBits(static_cast<double>(bits)));
  return world_size == 1 ? "nothing sent (one worker; each of more would send " + mib + ")" : "sent " + mib;
}

std::string formatEpochLine(const EpochSummary& summary, int64_t total_epochs, bool synthetic, int world_size) {
  std::string out = synthetic ? "[synthetic data] " : "";
  out += fmt::format("epoch {}/{}", summary.epoch, total_epochs);
  if (!summary.train.empty()) out += "  train" + formatMetrics(summary.train);
  if (!summary.validation.empty()) out += "  validation" + formatMetrics(summary.validation);
  if (!summary.test.empty()) out += "  test" + formatMetrics(summary.test);
  out += "  " + sentText(summary.bits, world_size);
  out += "  " + units::elapsedText(summary.elapsed_s);
  return out;
}

std::unique_ptr<MetricSink> makeConsoleSink(const SinkContext& context) {
  return std::make_unique<ConsoleSink>(context);
}

}  // namespace gcrun::outputs
