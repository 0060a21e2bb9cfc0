// A long wait's progress line, with the clock and the terminal injected: nothing for a wait shorter
// than the interval, then a line at most every interval, cleared at the end; nothing at all when
// the output is not a terminal; and the line's text (done/total, percent, rate, ETA).
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "outputs/progress/progress_line.h"

namespace {

using gcrun::outputs::ProgressLine;
using gcrun::outputs::progressText;

struct FakeOutput {
  std::ostringstream stream;
  double now = 100;

  ProgressLine::Output output(bool terminal, int columns = 200) {
    return {&stream, terminal, [this] { return now; }, columns};
  }
};

TEST(ProgressLine, AWaitShorterThanTheIntervalPrintsNothing) {
  FakeOutput out;
  {
    ProgressLine line("evaluating validation", 100, "batches", out.output(true));
    for (int i = 0; i < 100; ++i) {
      out.now += 0.02;  // 2 s in all
      line.advance();
    }
  }
  EXPECT_EQ(out.stream.str(), "");
}

TEST(ProgressLine, OnATerminalItRedrawsAtMostEveryIntervalAndClearsAtTheEnd) {
  FakeOutput out;
  ProgressLine line("evaluating validation", 100, "batches", out.output(true));
  for (int i = 0; i < 100; ++i) {
    out.now += 0.125;  // 12.5 s in all: lines at 2.5, 5, 7.5, 10 and 12.5 s
    line.advance();
  }
  line.finish();
  line.finish();
  const std::string text = out.stream.str();
  size_t redraws = 0;
  for (size_t at = text.find('\r'); at != std::string::npos; at = text.find('\r', at + 1)) ++redraws;
  EXPECT_EQ(redraws, 6u) << text;  // five lines and the clearing
  EXPECT_NE(text.find("\revaluating validation: 20/100 batches (20%), 8 batches/s, ETA 10s\033[K"), std::string::npos)
      << text;
  EXPECT_EQ(text.substr(text.size() - 4), "\r\033[K");
}

TEST(ProgressLine, NotOnATerminalItStaysQuiet) {
  FakeOutput out;
  ProgressLine line("converting", 0, "files", out.output(false));
  for (int i = 0; i < 100; ++i) {
    out.now += 1;
    line.advance();
  }
  line.finish();
  EXPECT_EQ(out.stream.str(), "");
}

TEST(ProgressLine, ALineWiderThanTheTerminalIsCutToOneRow) {
  FakeOutput out;
  ProgressLine line("evaluating a split with a very long name", 10, "batches", out.output(true, 20));
  out.now += 3;
  line.advance();
  EXPECT_EQ(out.stream.str(), "\revaluating a split \033[K");
}

TEST(ProgressLine, TheTextSaysDoneTotalPercentRateAndEta) {
  EXPECT_EQ(progressText("evaluating validation", 1200, 5000, "batches", 2.5),
            "evaluating validation: 1200/5000 batches (24%), 480 batches/s, ETA 8s");
  EXPECT_EQ(progressText("converting", 1200, 0, "files", 2.5), "converting: 1200 files, 480 files/s");
  EXPECT_EQ(progressText("calibrating", 10, 10, "sizes", 2), "calibrating: 10/10 sizes (100%), 5 sizes/s");
  EXPECT_EQ(progressText("calibrating", 0, 10, "sizes", 2), "calibrating: 0/10 sizes (0%), 0 sizes/s");
}

}  // namespace
