// The metric sinks (jsonl, csv, console), the console's line formats and the sink registry.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "outputs/builtin_sinks.h"
#include "outputs/metric_sink.h"
#include "tests/support/temp_dir.h"
#include "tests/support/user_error.h"

namespace gcrun::outputs {
namespace {

using gcrun::testing::TempDir;
using gcrun::testing::userErrorOf;

std::vector<std::string> readLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(Sinks, JsonlWritesOneObjectPerEvent) {
  TempDir dir;
  ExperimentConfig config;
  auto sink = sinkRegistry().at("jsonl").factory.make(SinkContext{dir.path().string(), config});
  sink->metric(MetricEvent{"accuracy", 0.5, "train", 1, 390, 8000});
  sink->metric(MetricEvent{"timer", 0.25, "", 0.5, 195, 0});
  sink->epochEnd(EpochSummary{});
  auto lines = readLines(dir.file("metrics.jsonl"));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            "{\"name\": \"accuracy\", \"value\": 0.5, \"split\": \"train\", \"epoch\": 1, "
            "\"step\": 390, \"bits\": 8000}");
  EXPECT_EQ(lines[1],
            "{\"name\": \"timer\", \"value\": 0.25, \"split\": \"\", \"epoch\": 0.5, "
            "\"step\": 195, \"bits\": 0}");
  sink->metric(MetricEvent{"cross_entropy", std::nan(""), "test", 2, 780, 16000});
  sink->close();
  lines = readLines(dir.file("metrics.jsonl"));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[2].find("\"value\": null"), std::string::npos) << lines[2];
}

TEST(Sinks, CsvWritesOneRowPerEpochWithFixedColumns) {
  TempDir dir;
  ExperimentConfig config;
  auto sink = sinkRegistry().at("csv").factory.make(SinkContext{dir.path().string(), config});
  EpochSummary first;
  first.epoch = 1;
  first.step = 390;
  first.train = {{"cross_entropy", 0.5}, {"accuracy", 0.75}};
  first.test = {{"accuracy", 0.8}};
  first.bits = 3ULL * 8 * 1024 * 1024;
  first.elapsed_s = 12.5;
  first.learning_rate = 0.1;
  sink->epochEnd(first);
  EpochSummary second = first;
  second.epoch = 2;
  second.step = 780;
  second.test.clear();
  second.bits = 8 * 1024 * 1024 / 2;
  sink->epochEnd(second);
  sink->close();
  auto lines = readLines(dir.file("epochs.csv"));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0],
            "epoch,step,train_accuracy,train_cross_entropy,test_accuracy,mib_sent,elapsed_s,"
            "learning_rate");
  EXPECT_EQ(lines[1], "1,390,0.75,0.5,0.8,3,12.5,0.1");
  EXPECT_EQ(lines[2], "2,780,0.75,0.5,,0.5,12.5,0.1");
}

// A run written before the column was named mib_sent (its values were MiB already) and resumed
// now: its rows go on under the header it has, which still names every column rightly.
TEST(Sinks, CsvResumedFromAnOldFileKeepsItsMbSentHeader) {
  TempDir dir;
  const std::string old_header = "epoch,step,train_accuracy,mb_sent,elapsed_s,learning_rate";
  std::ofstream(dir.file("epochs.csv")) << old_header << "\n1,390,0.75,3,12.5,0.1\n";
  ExperimentConfig config;
  SinkContext context{dir.path().string(), config};
  context.resume = true;
  auto sink = sinkRegistry().at("csv").factory.make(context);
  EpochSummary second;
  second.epoch = 2;
  second.step = 780;
  second.train = {{"accuracy", 0.8}};
  second.bits = 8 * 1024 * 1024;
  second.elapsed_s = 25;
  second.learning_rate = 0.1;
  sink->epochEnd(second);
  sink->close();
  EXPECT_EQ(readLines(dir.file("epochs.csv")),
            (std::vector<std::string>{old_header, "1,390,0.75,3,12.5,0.1", "2,780,0.8,1,25,0.1"}));
}

TEST(Sinks, FileSinkInUnwritableDirectoryFailsNamingTheFile) {
  TempDir dir;
  ExperimentConfig config;
  const std::string run_dir = dir.file("missing");
  try {
    sinkRegistry().at("csv").factory.make(SinkContext{run_dir, config});
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(run_dir + "/epochs.csv"), std::string::npos) << e.what();
  }
}

TEST(Sinks, ConsoleOffTerminalPrintsEveryNStepsTheLastStepAndEpochLines) {
  ExperimentConfig config;
  config.output.log_every_steps = 2;
  config.training.epochs = 1;
  auto sink = sinkRegistry().at("console").factory.make(SinkContext{"", config});
  ::testing::internal::CaptureStdout();  // a file, so the sink takes its non-terminal path
  for (int64_t step = 1; step <= 5; ++step) {
    sink->progress(Progress{step, /*total_steps=*/5, /*epoch=*/1, /*total_epochs=*/1,
                            /*loss=*/1.0 / step, /*samples_per_s=*/100,
                            /*elapsed_s=*/static_cast<double>(step)});
  }
  sink->metric(MetricEvent{"timer", 0.5, "", 1, 5, 0});
  sink->metric(MetricEvent{"accuracy", 0.5, "train", 1, 5, 0});
  EpochSummary summary;
  summary.epoch = 1;
  summary.elapsed_s = 5;
  sink->epochEnd(summary);
  sink->close();
  EXPECT_EQ(::testing::internal::GetCapturedStdout(),
            "step 2/5  epoch 1/1  loss 0.5000  100 samples/s  ETA 3s\n"
            "step 4/5  epoch 1/1  loss 0.2500  100 samples/s  ETA 1s\n"
            "step 5/5  epoch 1/1  loss 0.2000  100 samples/s  ETA 0s\n"
            "epoch 1/1  sent 0.0 MiB  5s\n");
}

TEST(ConsoleFormat, EpochLineWithAccuracy) {
  EpochSummary summary;
  summary.epoch = 3;
  summary.train = {{"cross_entropy", 0.4123}, {"accuracy", 0.8521}};
  summary.test = {{"cross_entropy", 0.3871}, {"accuracy", 0.8640}};
  summary.bits = static_cast<uint64_t>(12.3 * 8 * 1024 * 1024);
  summary.elapsed_s = 83;
  EXPECT_EQ(formatEpochLine(summary, 10, false),
            "epoch 3/10  train loss 0.4123 acc 85.21%  test loss 0.3871 acc 86.40%  sent 12.3 MiB  "
            "1m23s");
  EXPECT_EQ(formatEpochLine(summary, 10, true).rfind("[synthetic data] epoch 3/10  train", 0), 0u);
}

TEST(ConsoleFormat, EpochLineShowsOtherMetricsByName) {
  EpochSummary summary;
  summary.epoch = 1;
  summary.train = {{"cross_entropy", 4.5}, {"perplexity", 90.0171}};
  summary.bits = 0;
  summary.elapsed_s = 3725;
  EXPECT_EQ(formatEpochLine(summary, 2, false), "epoch 1/2  train loss 4.5000 perplexity 90.02  sent 0.0 MiB  1h02m");
}

// A lone worker sends nothing, though its reducer counts what it would send with more workers.
TEST(ConsoleFormat, EpochLineOfOneWorkerSaysNothingWasSent) {
  EpochSummary summary;
  summary.epoch = 1;
  summary.bits = static_cast<uint64_t>(12.3 * 8 * 1024 * 1024);
  summary.elapsed_s = 5;
  EXPECT_EQ(formatEpochLine(summary, 1, false, 1),
            "epoch 1/1  nothing sent (one worker; each of more would send 12.3 MiB)  5s");
  EXPECT_EQ(formatEpochLine(summary, 1, false, 2), "epoch 1/1  sent 12.3 MiB  5s");
}

TEST(ConsoleFormat, ProgressLineWithBarAndEta) {
  Progress p{/*step=*/500,
             /*total_steps=*/1000,
             /*epoch=*/2,
             /*total_epochs=*/4,
             /*loss=*/0.5,
             /*samples_per_s=*/1234.4,
             /*elapsed_s=*/30};
  EXPECT_EQ(formatProgressLine(p, 10), "[#####-----] step 500/1000  epoch 2/4  loss 0.5000  1234 samples/s  ETA 30s");
  p.step = 0;
  EXPECT_EQ(formatProgressLine(p, 0), "step 0/1000  epoch 2/4  loss 0.5000  1234 samples/s");
}

class RecordingSink : public MetricSink {
 public:
  void metric(const MetricEvent& e) override { names.push_back(e.name); }
  std::vector<std::string> names;
};

TEST(SinkRegistry, UnknownNameListsTheKnownSinks) {
  EXPECT_EQ(userErrorOf([] { sinkRegistry().at("wandb"); }),
            "unknown metric sink 'wandb'; known: console, csv, jsonl, tensorboard");
}

TEST(SinkRegistry, UserSinkReplacesTheBuiltInConsole) {
  auto& registry = sinkRegistry();
  registry.add("console", "test recorder", {[](const SinkContext&) { return std::make_unique<RecordingSink>(); }});
  ExperimentConfig config;
  auto sink = registry.at("console").factory.make(SinkContext{"", config});
  sink->metric(MetricEvent{"accuracy", 1, "test", 1, 1, 0});
  auto* recording = dynamic_cast<RecordingSink*>(sink.get());
  ASSERT_NE(recording, nullptr);
  EXPECT_EQ(recording->names, std::vector<std::string>{"accuracy"});
  EXPECT_EQ(registry.at("console").description, "test recorder");
  registry.add("console", "restored", {makeConsoleSink});
}

}  // namespace
}  // namespace gcrun::outputs
