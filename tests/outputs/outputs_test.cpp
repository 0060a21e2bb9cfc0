#include <gtest/gtest.h>
#include <unistd.h>

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
#include "outputs/files/file_lock.h"
#include "outputs/json.h"
#include "outputs/rank_logger.h"
#include "outputs/run_directory.h"
#include "outputs/statistics.h"
#include "outputs/timer.h"
#include "tests/support/json_string.h"
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
  EXPECT_EQ(jsonString("line\n\ttab\x01"), "\"line\\n\\ttab\\u0001\"");
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
  const std::string path = RunDirectory::create("", "powersgd-cifar").path();
  EXPECT_TRUE(std::regex_match(path, std::regex(R"(runs/powersgd-cifar-\d{8}-\d{6})"))) << path;
  EXPECT_TRUE(fs::is_directory(path));
  EXPECT_TRUE(std::regex_match(RunDirectory::create("", "").path(), std::regex(R"(runs/run-\d{8}-\d{6})")));
  EXPECT_TRUE(std::regex_match(RunDirectory::create("", "a/b c").path(), std::regex(R"(runs/a_b_c-\d{8}-\d{6})")));
}

TEST(RunFiles, DefaultDirectoryGetsASuffixInsteadOfReusingOne) {
  InTempCwd cwd;
  // Occupy the names of the next few seconds, so the call below must collide.
  std::time_t now = std::time(nullptr);
  std::vector<std::string> taken;
  for (int s = 0; s < 5; ++s) {
    taken.push_back("runs/exp-" + localStamp(now + s));
    fs::create_directories(taken.back());
    std::ofstream(taken.back() + "/marker") << "old";
  }
  const std::string path = RunDirectory::create("", "exp").path();
  ASSERT_EQ(path.substr(path.size() - 2), "-2") << path;
  EXPECT_NE(std::find(taken.begin(), taken.end(), path.substr(0, path.size() - 2)), taken.end());
  EXPECT_TRUE(fs::is_empty(path));
  const std::string third = RunDirectory::create("", "exp").path();
  EXPECT_NE(third, path);
  EXPECT_TRUE(fs::is_empty(third));
}

TEST(RunFiles, ExplicitDirectoryMayBeMissingOrEmpty) {
  TempDir dir;
  const std::string missing = dir.file("a/b/run");
  EXPECT_EQ(RunDirectory::create(missing, "exp").path(), missing);
  EXPECT_TRUE(fs::is_directory(missing));
  const std::string empty = dir.file("empty");
  fs::create_directory(empty);
  EXPECT_EQ(RunDirectory::create(empty, "exp").path(), empty);
}

TEST(RunFiles, ExplicitDirectoryWithFilesIsRefused) {
  TempDir dir;
  std::ofstream(dir.file("config.yaml")) << "seed: 1\n";
  const std::string message = userErrorOf([&] { RunDirectory::create(dir.path().string(), "exp").path(); });
  EXPECT_EQ(message, "output directory '" + dir.path().string() +
                         "' already holds files; choose another --output-dir or remove it");
  EXPECT_EQ(readFile(dir.file("config.yaml")), "seed: 1\n");
}

// A launch stopped in its first second (SIGINT before any worker wrote run.json) leaves the
// launcher's workers.json, maybe the lock and rank logs: no run, so a rerun may start there.
TEST(RunFiles, ADirectoryOfALaunchStoppedBeforeItsRunIsAcceptedForARerun) {
  TempDir dir;
  std::ofstream(dir.file("workers.json")) << "{}\n";
  std::ofstream(dir.file("rank-1.log")) << "";
  EXPECT_EQ(RunDirectory::create(dir.path().string(), "exp").path(), dir.path().string());
  std::ofstream(dir.file("run.json")) << "{}\n";
  EXPECT_NE(userErrorOf([&] { RunDirectory::create(dir.path().string(), "exp"); }).find("already holds files"),
            std::string::npos);
}

TEST(RunFiles, UncreatableDirectoryNamesPathAndReason) {
  TempDir dir;
  std::ofstream(dir.file("file")) << "x";
  const std::string below_file = dir.file("file/run");
  std::string message = userErrorOf([&] { RunDirectory::create(below_file, "exp").path(); });
  EXPECT_NE(message.find("cannot create output directory '" + below_file + "': "), std::string::npos) << message;
  EXPECT_NE(message.find("Not a directory"), std::string::npos) << message;
  message = userErrorOf([&] { RunDirectory::create(dir.file("file"), "exp").path(); });
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
  info.status = RunStatus::failed;
  info.error = "loss is \"nan\"";
  info.start_time = "2026-01-02T03:04:05Z";
  info.end_time = "2026-01-02T04:04:05Z";
  info.final_metrics = {{"test.accuracy", 0.875}, {"test.cross_entropy", 0.25}};
  const std::string json = runInfoJson(info);
  for (const std::string expected :
       {"\"experiment\": \"powersgd-cifar\"", "\"gcrun_version\": \"0.1.0\"", "\"torch_version\": \"1.13.1\"",
        "\"world_size\": 4", "\"backend\": \"gloo\"", "\"device\": \"cpu\"", "\"num_parameters\": 11173962",
        "\"steps\": 390", "\"epochs_done\": 2.5", "\"bits_sent\": 123456789012", "\"synthetic_data\": true",
        "\"status\": \"failed\"", "\"error\": \"loss is \\\"nan\\\"\"", "\"start_time\": \"2026-01-02T03:04:05Z\"",
        "\"end_time\": \"2026-01-02T04:04:05Z\"",
        "\"final_metrics\": {\n    \"test.accuracy\": 0.875,\n    \"test.cross_entropy\": 0.25\n  }"}) {
    EXPECT_NE(json.find(expected), std::string::npos) << expected << "\nin\n" << json;
  }
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.substr(json.size() - 2), "}\n");
  EXPECT_NE(runInfoJson(RunInfo{}).find("\"final_metrics\": {}"), std::string::npos);
}

TEST(RunFiles, RunInfoReadsBackAsWritten) {
  RunInfo info;
  info.experiment = "exp \"quoted\"\n";
  info.world_size = 4;
  info.simulated_workers = 2;
  info.compute_per_batch_ms = 1.25;
  info.epochs_done = 2.5;
  info.bits_sent = 123456789012ULL;
  info.peak_rss_mib = {100.5, 200};
  info.status = RunStatus::refused;
  info.error = "task.data_dir: no such directory";
  info.final_metrics = {{"test.accuracy", 0.875}, {"test.loss", NAN}};
  info.paper = {"test.accuracy", "Table 3", {{"value", 0.9}}};
  info.baseline = Baseline::half_precision;
  const std::string json = runInfoJson(info);
  EXPECT_NE(json.find("\"peak_rss_mib\": [100.5, 200]"), std::string::npos) << json;
  EXPECT_NE(json.find("\"baseline\": \"half-precision\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"test.loss\": null"), std::string::npos) << json;
  const auto back = parseRunInfo(json);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->experiment, info.experiment);
  EXPECT_EQ(back->world_size, 4);
  EXPECT_EQ(back->compute_per_batch_ms, 1.25);
  EXPECT_EQ(back->epochs_done, 2.5);
  EXPECT_EQ(back->bits_sent, info.bits_sent);
  EXPECT_EQ(back->peak_rss_mib, info.peak_rss_mib);
  EXPECT_EQ(back->status, RunStatus::refused);
  EXPECT_EQ(back->error, info.error);
  EXPECT_EQ(back->final_metrics.at("test.accuracy"), 0.875);
  EXPECT_TRUE(std::isnan(back->final_metrics.at("test.loss")));
  EXPECT_EQ(back->paper.numbers, info.paper.numbers);
  EXPECT_EQ(back->baseline, Baseline::half_precision);
  EXPECT_EQ(runInfoJson(*back), json);
  // A run.json from before the key, or with a value of another gcrun: no baseline recorded.
  EXPECT_FALSE(parseRunInfo("{\"status\": \"completed\"}")->baseline);
  EXPECT_FALSE(parseRunInfo("{\"baseline\": \"exact\"}")->baseline);
  // Not JSON, or not an object: nothing; fields of another type keep their defaults.
  EXPECT_FALSE(parseRunInfo("{\"status\": "));
  EXPECT_FALSE(parseRunInfo("[1, 2]"));
  EXPECT_EQ(parseRunInfo("{\"world_size\": \"four\", \"status\": 3}")->world_size, 1);
  // A status that is none of gcrun's words is no status.
  EXPECT_FALSE(parseRunInfo("{\"status\": \"bogus\"}")->status.has_value());
  EXPECT_FALSE(parseRunInfo("{\"status\": 3}")->status.has_value());
}

TEST(RunFiles, RunInfosScheduleReadsBackAsWritten) {
  RunInfo info;
  info.schedule = SyncSchedule{"streaming-diloco", true, 12, 3, 2, true, 0};
  const std::string json = runInfoJson(info);
  EXPECT_NE(json.find("\"schedule\": {"), std::string::npos) << json;
  const auto back = parseRunInfo(json);
  ASSERT_TRUE(back && back->schedule);
  EXPECT_EQ(*back->schedule, *info.schedule);
  EXPECT_EQ(back->schedule_problem, "");
  EXPECT_EQ(runInfoJson(*back), json);
  // A run from before schedules were recorded: none, and no problem.
  EXPECT_FALSE(parseRunInfo("{\"status\": \"completed\"}")->schedule);
  EXPECT_EQ(parseRunInfo("{\"status\": \"completed\"}")->schedule_problem, "");
}

TEST(RunFiles, ARecordedScheduleFromElsewhereIsCheckedFieldByField) {
  const std::string fields =
      "\"strategy\": \"diloco\", \"periodic\": true, \"fragments\": 1, \"delay\": 0, "
      "\"overlapped\": false, \"warmup_steps\": 0";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"\"weekly\"", "schedule is not an object"},
      {"{" + fields + "}", "schedule.every is missing or not a whole number"},
      {"{" + fields + ", \"every\": \"8\"}", "schedule.every is missing or not a whole number"},
      {"{" + fields + ", \"every\": 8.5}", "schedule.every is missing or not a whole number"},
      {"{" + fields + ", \"every\": 0}", "schedule.every is 0; expected a whole number from 1 to 1000000"},
      {"{" + fields + ", \"every\": 18446744073709551615}", "schedule.every is -1"},
      {"{\"strategy\": \"x\\u001b[31m\", \"periodic\": false, \"every\": 1, \"fragments\": 1, \"delay\": 0, "
       "\"overlapped\": false, \"warmup_steps\": 0}",
       "schedule.strategy is not a strategy's name"},
      {"{\"strategy\": \"diloco\", \"periodic\": \"yes\", \"every\": 1}", "schedule.periodic is missing or not true"},
  };
  for (const auto& [schedule, problem] : cases) {
    SCOPED_TRACE(schedule);
    const auto info = parseRunInfo("{\"status\": \"completed\", \"schedule\": " + schedule + "}");
    ASSERT_TRUE(info);
    EXPECT_FALSE(info->schedule);
    EXPECT_NE(info->schedule_problem.find(problem), std::string::npos) << info->schedule_problem;
    EXPECT_EQ(info->status, RunStatus::completed);  // the rest of run.json still reads
  }
}

// Each status is one word in the files, read back as itself; no other text is a status.
TEST(RunFiles, EveryRunStatusIsOneWordBothWays) {
  const std::vector<std::pair<RunStatus, std::string>> words = {
      {RunStatus::pending, "pending"},         {RunStatus::running, "running"}, {RunStatus::completed, "completed"},
      {RunStatus::interrupted, "interrupted"}, {RunStatus::failed, "failed"},   {RunStatus::refused, "refused"}};
  for (const auto& [status, word] : words) {
    EXPECT_EQ(runStatusText(status), word);
    EXPECT_EQ(parseRunStatus(word), status);
  }
  for (const char* other : {"", "Completed", "completed ", "unknown", "unreadable"})
    EXPECT_FALSE(parseRunStatus(other));
}

TEST(RunFiles, ARefusalIsRecordedOnlyWhereARunCouldStart) {
  TempDir dir;
  RunInfo refused;
  refused.status = RunStatus::refused;
  refused.error = "bad input";
  EXPECT_TRUE(RunDirectory::recordRefusal(dir.file("new/run"), refused));
  EXPECT_EQ(RunDirectory(dir.file("new/run")).readInfo()->error, "bad input");
  fs::create_directories(dir.file("launched"));
  std::ofstream(dir.file("launched/workers.json")) << "{}\n";
  std::ofstream(dir.file("launched/rank-0.log")) << "log\n";
  EXPECT_TRUE(RunDirectory::recordRefusal(dir.file("launched"), refused));
  // Someone's data, or a run that has its own record, is left alone.
  fs::create_directories(dir.file("data"));
  std::ofstream(dir.file("data/notes.txt")) << "mine\n";
  EXPECT_FALSE(RunDirectory::recordRefusal(dir.file("data"), refused));
  EXPECT_FALSE(fs::exists(dir.file("data/run.json")));
  refused.error = "again";
  EXPECT_FALSE(RunDirectory::recordRefusal(dir.file("new/run"), refused));
  EXPECT_EQ(RunDirectory(dir.file("new/run")).readInfo()->error, "bad input");
}

TEST(RunFiles, ALockFileIsHeldByOneHolderAtATime) {
  TempDir dir;
  const auto directory = files::Directory::open(dir.path().string(), false);
  std::string holder;
  auto first = files::tryLockFile(directory, "x.lock", holder);
  ASSERT_TRUE(first);
  EXPECT_FALSE(files::tryLockFile(directory, "x.lock", holder));
  EXPECT_EQ(holder, std::to_string(::getpid()));
  first = files::UniqueFd();
  EXPECT_TRUE(files::tryLockFile(directory, "x.lock", holder));
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
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
}

}  // namespace
}  // namespace gcrun::outputs
