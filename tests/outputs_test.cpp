#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>
#include <vector>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "hyperparams/base/errors.h"
#include "outputs/builtin_sinks.h"
#include "outputs/json.h"
#include "outputs/metric_sink.h"
#include "outputs/rank_logger.h"
#include "outputs/run_files.h"
#include "outputs/statistics.h"
#include "outputs/timer.h"
#include "tests/support/temp_dir.h"
#include "tests/support/user_error.h"

namespace gcrun::outputs {
namespace {

namespace fs = std::filesystem;
using gcrun::testing::TempDir;

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> readLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

using gcrun::testing::userErrorOf;

// Runs the test body in a fresh working directory, since default run directories are relative.
class InTempCwd {
 public:
  InTempCwd() : previous_(fs::current_path()) { fs::current_path(dir_.path()); }
  ~InTempCwd() { fs::current_path(previous_); }
  const TempDir& dir() const { return dir_; }

 private:
  TempDir dir_;
  fs::path previous_;
};

TEST(Json, StringEscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(jsonString("plain"), "\"plain\"");
  EXPECT_EQ(jsonString("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(jsonString("line\n\ttab\x01"), "\"line\\u000a\\u0009tab\\u0001\"");
  EXPECT_EQ(jsonString("caf\xc3\xa9"), "\"caf\xc3\xa9\"");
  EXPECT_EQ(jsonString(""), "\"\"");
}

TEST(Json, NumberIsShortestRoundTripText) {
  EXPECT_EQ(jsonNumber(0.1), "0.1");
  EXPECT_EQ(jsonNumber(3), "3");
  EXPECT_EQ(jsonNumber(-2.5), "-2.5");
  EXPECT_EQ(jsonNumber(123456789012.0), "123456789012");
  EXPECT_EQ(jsonNumber(0), "0");
  EXPECT_EQ(jsonNumber(1e-7), "1e-07");
  const double third = 1.0 / 3.0;
  EXPECT_EQ(std::stod(jsonNumber(third)), third);
  EXPECT_EQ(jsonNumber(third), "0.3333333333333333");
}

TEST(Json, NonFiniteNumbersBecomeNull) {
  EXPECT_EQ(jsonNumber(std::numeric_limits<double>::quiet_NaN()), "null");
  EXPECT_EQ(jsonNumber(std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(jsonNumber(-std::numeric_limits<double>::infinity()), "null");
}

TEST(Timer, SkipsTheFirstEventOfEachLabel) {
  Timer timer;
  timer.record("batch", 1.0);
  timer.record("batch", 2.0);
  timer.record("batch", 4.0);
  timer.record("test.last", 5.0);
  const auto& batch = timer.stats().at("batch");
  EXPECT_EQ(batch.seen, 3);
  EXPECT_EQ(batch.events, 2);
  EXPECT_DOUBLE_EQ(batch.total_s, 6.0);
  EXPECT_DOUBLE_EQ(batch.last_s, 4.0);
  const auto& test = timer.stats().at("test.last");
  EXPECT_EQ(test.seen, 1);
  EXPECT_EQ(test.events, 0);
  EXPECT_DOUBLE_EQ(test.total_s, 0.0);
}

TEST(Timer, SummaryJsonHasTheReferenceFieldsSortedByLabel) {
  Timer timer;
  timer.record("reduce", 9.0);
  for (double s : {1.0, 2.0, 4.0}) timer.record("batch", s);
  EXPECT_EQ(timer.summaryJson(),
            "{\n"
            "  \"batch\": {\"label\": \"batch\", \"average_duration\": 3, \"median_duration\": 3, "
            "\"n_events\": 2, \"total_time\": 6},\n"
            "  \"reduce\": {\"label\": \"reduce\", \"average_duration\": 0, \"median_duration\": 0, "
            "\"n_events\": 0, \"total_time\": 0}\n"
            "}\n");
  EXPECT_EQ(Timer().summaryJson(), "{}\n");
}

TEST(Timer, MedianIgnoresTheFirstEventAndOneOutlier) {
  Timer timer;
  for (double s : {50.0, 1.0, 2.0, 100.0, 3.0}) timer.record("batch", s);
  EXPECT_NE(timer.summaryJson().find("\"median_duration\": 2.5,"), std::string::npos) << timer.summaryJson();
}

TEST(Median, OfOddAndEvenCounts) {
  EXPECT_EQ(median({}), 0);
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
}

TEST(Timer, ScopeSynchronizesAtBothEndsAndRecordsItsLabel) {
  Timer timer;
  int syncs = 0;
  timer.setSynchronize([&] { ++syncs; });
  {
    auto scope = timer.scope("batch.forward");
    EXPECT_EQ(syncs, 1);
  }
  EXPECT_EQ(syncs, 2);
  const auto& stats = timer.stats().at("batch.forward");
  EXPECT_EQ(stats.seen, 1);
  EXPECT_GE(stats.last_s, 0.0);
}

std::string localStamp(std::time_t t) {
  std::tm local{};
  localtime_r(&t, &local);
  char text[32];
  std::strftime(text, sizeof(text), "%Y%m%d-%H%M%S", &local);
  return text;
}

TEST(RunFiles, DefaultDirectoryIsNamedAfterExperimentAndTime) {
  InTempCwd cwd;
  const std::string path = createRunDirectory("", "powersgd-cifar");
  EXPECT_TRUE(std::regex_match(path, std::regex(R"(outputs/powersgd-cifar-\d{8}-\d{6})"))) << path;
  EXPECT_TRUE(fs::is_directory(path));
  EXPECT_TRUE(std::regex_match(createRunDirectory("", ""), std::regex(R"(outputs/run-\d{8}-\d{6})")));
  EXPECT_TRUE(std::regex_match(createRunDirectory("", "a/b c"),
                               std::regex(R"(outputs/a_b_c-\d{8}-\d{6})")));
}

TEST(RunFiles, DefaultDirectoryGetsASuffixInsteadOfReusingOne) {
  InTempCwd cwd;
  // Occupy the names of the next few seconds, so the call below must collide.
  std::time_t now = std::time(nullptr);
  std::vector<std::string> taken;
  for (int s = 0; s < 5; ++s) {
    taken.push_back("outputs/exp-" + localStamp(now + s));
    fs::create_directories(taken.back());
    std::ofstream(taken.back() + "/marker") << "old";
  }
  const std::string path = createRunDirectory("", "exp");
  ASSERT_EQ(path.substr(path.size() - 2), "-2") << path;
  EXPECT_NE(std::find(taken.begin(), taken.end(), path.substr(0, path.size() - 2)), taken.end());
  EXPECT_TRUE(fs::is_empty(path));
  const std::string third = createRunDirectory("", "exp");
  EXPECT_NE(third, path);
  EXPECT_TRUE(fs::is_empty(third));
}

TEST(RunFiles, ExplicitDirectoryMayBeMissingOrEmpty) {
  TempDir dir;
  const std::string missing = dir.file("a/b/run");
  EXPECT_EQ(createRunDirectory(missing, "exp"), missing);
  EXPECT_TRUE(fs::is_directory(missing));
  const std::string empty = dir.file("empty");
  fs::create_directory(empty);
  EXPECT_EQ(createRunDirectory(empty, "exp"), empty);
}

TEST(RunFiles, ExplicitDirectoryWithFilesIsRefused) {
  TempDir dir;
  std::ofstream(dir.file("config.yaml")) << "seed: 1\n";
  const std::string message = userErrorOf([&] { createRunDirectory(dir.path().string(), "exp"); });
  EXPECT_EQ(message, "output directory '" + dir.path().string() +
                         "' already holds files; choose another --output-dir or remove it");
  EXPECT_EQ(readFile(dir.file("config.yaml")), "seed: 1\n");
}

TEST(RunFiles, UncreatableDirectoryNamesPathAndReason) {
  TempDir dir;
  std::ofstream(dir.file("file")) << "x";
  const std::string below_file = dir.file("file/run");
  std::string message = userErrorOf([&] { createRunDirectory(below_file, "exp"); });
  EXPECT_NE(message.find("cannot create output directory '" + below_file + "': "), std::string::npos)
      << message;
  EXPECT_NE(message.find("Not a directory"), std::string::npos) << message;
  message = userErrorOf([&] { createRunDirectory(dir.file("file"), "exp"); });
  EXPECT_NE(message.find("is not a directory"), std::string::npos) << message;
}

TEST(RunFiles, WriteFileAtomicallyReplacesContentAndLeavesNoTempFile) {
  TempDir dir;
  const std::string path = dir.file("run.json");
  writeFileAtomically(path, "first, longer contents");
  writeFileAtomically(path, "second");
  EXPECT_EQ(readFile(path), "second");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

TEST(RunFiles, WriteFileAtomicallyFailureNamesPathAndReason) {
  TempDir dir;
  const std::string path = dir.file("missing/run.json");
  try {
    writeFileAtomically(path, "x");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'" + path + "'"), std::string::npos) << message;
    EXPECT_NE(message.find("No such file or directory"), std::string::npos) << message;
  }
}

TEST(RunFiles, RunInfoJsonHoldsEveryField) {
  RunInfo info;
  info.experiment = "powersgd-cifar";
  info.gcrun_version = "0.1.0";
  info.torch_version = "1.13.1";
  info.world_size = 4;
  info.backend = "gloo";
  info.device = "cpu";
  info.num_parameters = 11173962;
  info.steps = 390;
  info.epochs_done = 2.5;
  info.bits_sent = 123456789012ULL;
  info.synthetic_data = true;
  info.status = "failed";
  info.error = "loss is \"nan\"";
  info.start_time = "2026-01-02T03:04:05Z";
  info.end_time = "2026-01-02T04:04:05Z";
  info.final_metrics = {{"test.accuracy", 0.875}, {"test.cross_entropy", 0.25}};
  const std::string json = runInfoJson(info);
  for (const std::string expected :
       {"\"experiment\": \"powersgd-cifar\"", "\"gcrun_version\": \"0.1.0\"",
        "\"torch_version\": \"1.13.1\"", "\"world_size\": 4", "\"backend\": \"gloo\"",
        "\"device\": \"cpu\"", "\"num_parameters\": 11173962", "\"steps\": 390",
        "\"epochs_done\": 2.5", "\"bits_sent\": 123456789012", "\"synthetic_data\": true",
        "\"status\": \"failed\"", "\"error\": \"loss is \\\"nan\\\"\"",
        "\"start_time\": \"2026-01-02T03:04:05Z\"", "\"end_time\": \"2026-01-02T04:04:05Z\"",
        "\"final_metrics\": {\n    \"test.accuracy\": 0.875,\n    \"test.cross_entropy\": 0.25\n  }"}) {
    EXPECT_NE(json.find(expected), std::string::npos) << expected << "\nin\n" << json;
  }
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.substr(json.size() - 2), "}\n");
  EXPECT_NE(runInfoJson(RunInfo{}).find("\"final_metrics\": {}"), std::string::npos);
}

TEST(RunFiles, IsoTimeNowIsUtcIso8601) {
  EXPECT_TRUE(std::regex_match(isoTimeNow(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")));
}

TEST(RankLogger, WritesEveryLevelToTheRankFileAndCanBeInstalledTwice) {
  TempDir first_dir;
  TempDir second_dir;
  installRankLogger(first_dir.path().string(), 0);
  spdlog::info("first logger");
  auto logger = installRankLogger(second_dir.path().string(), 3);
  spdlog::debug("detail {}", 42);
  spdlog::warn("careful");
  logger->flush();
  const std::string first = readFile(first_dir.file("rank-0.log"));
  EXPECT_NE(first.find("[rank 0] first logger"), std::string::npos) << first;
  const std::string second = readFile(second_dir.file("rank-3.log"));
  EXPECT_NE(second.find("[debug] [rank 3] detail 42"), std::string::npos) << second;
  EXPECT_NE(second.find("[warning] [rank 3] careful"), std::string::npos) << second;
  EXPECT_EQ(second.find("first logger"), std::string::npos);
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
}

TEST(Sinks, JsonlWritesOneObjectPerEvent) {
  TempDir dir;
  ExperimentConfig config;
  auto sink = sinkRegistry().at("jsonl").factory(SinkContext{dir.path().string(), config});
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
  auto sink = sinkRegistry().at("csv").factory(SinkContext{dir.path().string(), config});
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
            "epoch,step,train_accuracy,train_cross_entropy,test_accuracy,mb_sent,elapsed_s,"
            "learning_rate");
  EXPECT_EQ(lines[1], "1,390,0.75,0.5,0.8,3,12.5,0.1");
  EXPECT_EQ(lines[2], "2,780,0.75,0.5,,0.5,12.5,0.1");
}

TEST(Sinks, FileSinkInUnwritableDirectoryFailsNamingTheFile) {
  TempDir dir;
  ExperimentConfig config;
  const std::string run_dir = dir.file("missing");
  try {
    sinkRegistry().at("csv").factory(SinkContext{run_dir, config});
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(run_dir + "/epochs.csv"), std::string::npos) << e.what();
  }
}

TEST(Sinks, ConsoleOffTerminalPrintsEveryNStepsTheLastStepAndEpochLines) {
  ExperimentConfig config;
  config.output.log_every_steps = 2;
  config.training.epochs = 1;
  auto sink = sinkRegistry().at("console").factory(SinkContext{"", config});
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
            "epoch 1/1  sent 0.0 MB  5s\n");
}

TEST(ConsoleFormat, Duration) {
  EXPECT_EQ(formatDuration(0), "0s");
  EXPECT_EQ(formatDuration(45.4), "45s");
  EXPECT_EQ(formatDuration(59.6), "1m00s");
  EXPECT_EQ(formatDuration(83), "1m23s");
  EXPECT_EQ(formatDuration(7500), "2h05m");
  EXPECT_EQ(formatDuration(-1), "?");
}

TEST(ConsoleFormat, EpochLineWithAccuracy) {
  EpochSummary summary;
  summary.epoch = 3;
  summary.train = {{"cross_entropy", 0.4123}, {"accuracy", 0.8521}};
  summary.test = {{"cross_entropy", 0.3871}, {"accuracy", 0.8640}};
  summary.bits = static_cast<uint64_t>(12.3 * 8 * 1024 * 1024);
  summary.elapsed_s = 83;
  EXPECT_EQ(formatEpochLine(summary, 10, false),
            "epoch 3/10  train loss 0.4123 acc 85.21%  test loss 0.3871 acc 86.40%  sent 12.3 MB  "
            "1m23s");
  EXPECT_EQ(formatEpochLine(summary, 10, true).rfind("[synthetic data] epoch 3/10  train", 0), 0u);
}

TEST(ConsoleFormat, EpochLineShowsOtherMetricsByName) {
  EpochSummary summary;
  summary.epoch = 1;
  summary.train = {{"cross_entropy", 4.5}, {"perplexity", 90.0171}};
  summary.bits = 0;
  summary.elapsed_s = 3725;
  EXPECT_EQ(formatEpochLine(summary, 2, false),
            "epoch 1/2  train loss 4.5000 perplexity 90.02  sent 0.0 MB  1h02m");
}

TEST(ConsoleFormat, ProgressLineWithBarAndEta) {
  Progress p{/*step=*/500, /*total_steps=*/1000, /*epoch=*/2, /*total_epochs=*/4, /*loss=*/0.5,
             /*samples_per_s=*/1234.4, /*elapsed_s=*/30};
  EXPECT_EQ(formatProgressLine(p, 10),
            "[#####-----] step 500/1000  epoch 2/4  loss 0.5000  1234 samples/s  ETA 30s");
  p.step = 0;
  EXPECT_EQ(formatProgressLine(p, 0), "step 0/1000  epoch 2/4  loss 0.5000  1234 samples/s");
}

class RecordingSink : public MetricSink {
 public:
  void metric(const MetricEvent& e) override { names.push_back(e.name); }
  std::vector<std::string> names;
};

TEST(SinkRegistry, UnknownNameListsTheKnownSinks) {
  EXPECT_EQ(userErrorOf([] { sinkRegistry().at("tensorboard"); }),
            "unknown metric sink 'tensorboard'; known: console, csv, jsonl");
}

TEST(SinkRegistry, UserSinkReplacesTheBuiltInConsole) {
  auto& registry = sinkRegistry();
  registry.add("console", "test recorder",
               [](const SinkContext&) { return std::make_unique<RecordingSink>(); });
  ExperimentConfig config;
  auto sink = registry.at("console").factory(SinkContext{"", config});
  sink->metric(MetricEvent{"accuracy", 1, "test", 1, 1, 0});
  auto* recording = dynamic_cast<RecordingSink*>(sink.get());
  ASSERT_NE(recording, nullptr);
  EXPECT_EQ(recording->names, std::vector<std::string>{"accuracy"});
  EXPECT_EQ(registry.at("console").description, "test recorder");
  registry.add("console", "restored", makeConsoleSink);
}

}  // namespace
}  // namespace gcrun::outputs
