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

TEST(TensorboardSink, TagsEachLayerRowKnownValues) {
  LayerStatsRow row{20, "conv1.weight", {32, 1, 5, 5}, 800, 3712, 0.5, 0.25, 2};
  auto scalars = layerScalarsOf(row);
  ASSERT_EQ(scalars.size(), 3u);
  EXPECT_EQ(scalars[0].tag, "layers/conv1.weight/grad_norm");
  EXPECT_EQ(scalars[0].value, 0.5);
  EXPECT_EQ(scalars[1].tag, "layers/conv1.weight/rel_compression_error");
  EXPECT_EQ(scalars[1].value, 0.25);
  EXPECT_EQ(scalars[2].tag, "layers/conv1.weight/bits");
  EXPECT_EQ(scalars[2].value, 3712);
  // What a row does not know has no scalar.
  row.bits.reset();
  row.rel_compression_error.reset();
  scalars = layerScalarsOf(row);
  ASSERT_EQ(scalars.size(), 1u);
  EXPECT_EQ(scalars[0].tag, "layers/conv1.weight/grad_norm");
}

TEST(TensorboardSink, WritesLayerRowsWithTheNextLogStep) {
  TempDir dir;
  ExperimentConfig config;
  auto sink = makeTensorboardSink({dir.path().string(), config});
  const std::string file = onlyEventFile(dir);
  ASSERT_FALSE(file.empty());
  if (const auto read = runEventReader("--prefix " + file); !read.skip.empty()) GTEST_SKIP() << read.skip;

  // Two rows, one knowing everything, one only its gradient: 3 + 1 scalars, buffered.
  sink->layerStats({{10, "fc.weight", {10, 4}, 40, 640, 1.5, 0.125, 2},
                    {10, "fc.bias", {10}, 10, std::nullopt, 0.5, std::nullopt, std::nullopt}});
  EXPECT_EQ(runEventReader("--prefix " + file).command.output, "2\n");
  sink->metric(trainingLoss(10));
  EXPECT_EQ(runEventReader("--prefix " + file).command.output, "8\n");
}

}  // namespace
}  // namespace gcrun::outputs::tensorboard
