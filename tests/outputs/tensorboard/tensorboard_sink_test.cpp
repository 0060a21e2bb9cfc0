// The sink's file before the run ends: what a crash would leave is whole records, read by the
// independent reader (read_tfevents.py).
#include <gtest/gtest.h>

#include <filesystem>

#include "outputs/run_directory.h"
#include "outputs/tensorboard/tensorboard_sink.h"
#include "tests/outputs/tensorboard/python_reader.h"
#include "tests/support/temp_dir.h"

namespace gcrun::outputs::tensorboard {
namespace {

using gcrun::testing::runEventReader;
using gcrun::testing::TempDir;

std::string onlyEventFile(const TempDir& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir.file(run_files::kTensorboard))) {
    names.push_back(entry.path().string());
  }
  EXPECT_EQ(names.size(), 1u);
  return names.empty() ? "" : names.front();
}

MetricEvent trainingLoss(int64_t step) {
  MetricEvent event;
  event.name = "cross_entropy";
  event.split = "train";
  event.step = step;
  event.window = 10;
  event.value = 1.0 / static_cast<double>(step);
  event.bits = static_cast<uint64_t>(step) << 20;
  return event;
}

TEST(TensorboardSink, LeavesWholeRecordsAtEveryLogStep) {
  TempDir dir;
  ExperimentConfig config;
  auto sink = makeTensorboardSink({dir.path().string(), config});
  const std::string file = onlyEventFile(dir);
  ASSERT_FALSE(file.empty());

  // Opening wrote the file version and the session start.
  auto read = runEventReader("--prefix " + file);
  if (!read.skip.empty()) GTEST_SKIP() << read.skip;
  EXPECT_EQ(read.command.exit_code, 0) << read.command.output;
  EXPECT_EQ(read.command.output, "2\n");

  // A log step: the loss, comm/mib_sent, written at once.
  sink->metric(trainingLoss(10));
  read = runEventReader("--prefix " + file);
  EXPECT_EQ(read.command.output, "4\n") << read.command.output;

  // A compression sample waits in the buffer for the next log step.
  MetricEvent sample = trainingLoss(10);
  sample.name = "grad_norm";
  sample.window = 0;
  sink->metric(sample);
  EXPECT_EQ(runEventReader("--prefix " + file).command.output, "4\n");

  sink->close();
  EXPECT_EQ(runEventReader("--prefix " + file).command.output, "6\n");
}

}  // namespace
}  // namespace gcrun::outputs::tensorboard
