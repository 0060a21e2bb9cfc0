// The gcrun binary with the example plugins (examples/: a reducer, a wrapping reducer, a metric
// sink), the reducer listing and the reducer benchmark, run as a user would.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "tests/support/command.h"
#include "tests/support/temp_dir.h"

namespace {

using gcrun::testing::TempDir;

using gcrun::testing::CommandResult;
using gcrun::testing::contains;
using gcrun::testing::readFile;

CommandResult gcrun(const std::string& arguments) {
  return gcrun::testing::runCommand(std::string(GCRUN_BINARY_PATH) + " " + arguments);
}

size_t lineCount(const std::string& text) {
  std::stringstream stream(text);
  size_t count = 0;
  for (std::string line; std::getline(stream, line);) count += line.empty() ? 0 : 1;
  return count;
}

const std::string kPlugin = std::string("--plugin ") + GCRUN_PLUGIN_PATH;
const std::string kRecording = std::string("--plugin ") + GCRUN_RECORDING_PLUGIN_PATH;
const std::string kTerse = std::string("--plugin ") + GCRUN_TERSE_PLUGIN_PATH;

// The lines of `text` that contain `part`.
std::vector<std::string> linesWith(const std::string& text, const std::string& part) {
  std::vector<std::string> lines;
  std::stringstream stream(text);
  for (std::string line; std::getline(stream, line);) {
    if (contains(line, part)) lines.push_back(line);
  }
  return lines;
}

// The tab-separated fields of the line of a recording table that starts with `parameter`.
std::vector<std::string> recordOf(const std::string& table, const std::string& parameter) {
  std::stringstream stream(table);
  for (std::string line; std::getline(stream, line);) {
    if (line.rfind(parameter + "\t", 0) != 0) continue;
    std::vector<std::string> fields;
    std::stringstream cells(line);
    for (std::string cell; std::getline(cells, cell, '\t');) fields.push_back(cell);
    return fields;
  }
  return {};
}

TEST(Plugins, ListShowsThePluginReducer) {
  const auto result = gcrun("list reducers " + kPlugin);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(contains(result.output, "int8-sum")) << result.output;
  EXPECT_TRUE(contains(result.output, "8-bit all-reduce")) << result.output;
  // The built-ins are still there.
  EXPECT_TRUE(contains(result.output, "powersgd")) << result.output;
  EXPECT_FALSE(contains(gcrun("list reducers").output, "int8-sum"));
}

TEST(Plugins, TwoWorkersTrainWithThePluginReducer) {
  TempDir dir;
  const std::string run_dir = dir.file("run");
  const auto result = gcrun("experiment fashion-sgd " + kPlugin + " --nproc-per-node 2 --output-dir " + run_dir +
                            " --set reducer.name=int8-sum --set reducer.int8_levels=60 --set task.synthetic=true"
                            " --set training.max_steps=3");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto config = YAML::LoadFile(run_dir + "/config.yaml");
  EXPECT_EQ(config["reducer"]["name"].as<std::string>(), "int8-sum");
  EXPECT_EQ(config["reducer"]["int8_levels"].as<int>(), 60);
  std::ifstream run_json(run_dir + "/run.json");
  std::stringstream text;
  text << run_json.rdbuf();
  EXPECT_TRUE(contains(text.str(), "\"completed\"")) << text.str();
  EXPECT_TRUE(contains(text.str(), "\"steps\": 3")) << text.str();
}

// The plugin's own setting, declared next to its reducer, works like a built-in key.
TEST(Plugins, ThePluginDeclaresItsOwnSetting) {
  const auto shown = gcrun("show fashion-sgd " + kPlugin + " --set reducer.name=int8-sum --set reducer.int8_levels=60");
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_TRUE(contains(shown.output, "  int8_levels: 60\n")) << shown.output;
  const auto keys = gcrun("list keys " + kPlugin);
  EXPECT_TRUE(contains(keys.output, "reducer.int8_levels")) << keys.output;
  EXPECT_TRUE(contains(keys.output, "accepts an integer >= 0 (0: 127 - workers)")) << keys.output;
  EXPECT_TRUE(contains(gcrun("list reducers " + kPlugin).output, "reducer.int8_levels = 0"));
  // Without the plugin the key is unknown; a bad value is refused with what it accepts.
  const auto unknown = gcrun("show fashion-sgd --set reducer.int8_levels=60");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_TRUE(contains(unknown.output, "unknown key 'reducer.int8_levels'")) << unknown.output;
  const auto negative = gcrun("show fashion-sgd " + kPlugin + " --set reducer.int8_levels=-1");
  EXPECT_EQ(negative.exit_code, 2) << negative.output;
  EXPECT_TRUE(contains(negative.output, "reducer.int8_levels = '-1'")) << negative.output;
  // The reducer itself refuses a level that could overflow, naming the key.
  TempDir dir;
  const auto overflow = gcrun("experiment fashion-sgd " + kPlugin +
                              " --set reducer.name=int8-sum --set reducer.int8_levels=127 --set task.synthetic=true"
                              " --set training.max_steps=1 --output-dir " +
                              dir.file("run"));
  EXPECT_EQ(overflow.exit_code, 2) << overflow.output;
  EXPECT_TRUE(contains(overflow.output, "reducer.int8_levels: 127 with 1 workers")) << overflow.output;
}

TEST(Plugins, ShowAcceptsThePluginOption) {
  const auto result = gcrun("show fashion-sgd " + kPlugin + " --set reducer.name=int8-sum");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(contains(result.output, "name: int8-sum")) << result.output;
}

void expectUserError(const CommandResult& result, const std::string& part) {
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_EQ(lineCount(result.output), 1u) << result.output;
  EXPECT_TRUE(contains(result.output, part)) << result.output;
}

TEST(Plugins, BadPluginsAreUserErrors) {
  expectUserError(gcrun("list reducers --plugin /nonexistent/plugin.so"), "/nonexistent/plugin.so: no such file");
  TempDir dir;
  const auto not_a_library = dir.file("text.so");
  std::ofstream(not_a_library) << "not a library\n";
  expectUserError(gcrun("experiment fashion-sgd --plugin " + not_a_library), "cannot load");
  // A real shared library that is no plugin.
  expectUserError(gcrun("show fashion-sgd --plugin " + std::string(GCRUN_NOT_A_PLUGIN_PATH)), "no gcrun_register");
}

// The sink plugin is selected in output.sinks and reads its own output.terse_digits.
TEST(Plugins, ASinkPluginWithItsOwnSetting) {
  TempDir dir;
  const auto result = gcrun("experiment fashion-sgd " + kTerse + " --output-dir " + dir.file("run") +
                            " --set 'output.sinks=[terse,jsonl]' --set output.terse_digits=2"
                            " --set task.synthetic=true --set training.max_steps=3");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto lines = linesWith(result.output, "terse: epoch=1 step=3 test_accuracy=");
  ASSERT_EQ(lines.size(), 1u) << result.output;
  // Two decimals, then the event count.
  const auto accuracy = lines[0].substr(lines[0].find("test_accuracy=") + 14);
  EXPECT_EQ(accuracy.find(' '), 4u) << lines[0];
  EXPECT_TRUE(contains(result.output, "terse: closed after")) << result.output;
  EXPECT_TRUE(std::filesystem::exists(dir.file("run") + "/metrics.jsonl"));
  EXPECT_TRUE(contains(gcrun("list keys " + kTerse).output, "output.terse_digits"));
  // `gcrun show` writes what a run reads: the sink's setting where the sink is selected, or given.
  const std::string set_digits = " --set output.terse_digits=2";
  EXPECT_TRUE(contains(gcrun("show fashion-sgd " + kTerse + " --set 'output.sinks=[terse,jsonl]'" + set_digits).output,
                       "  terse_digits: 2\n"));
  EXPECT_FALSE(contains(gcrun("show fashion-sgd " + kTerse).output, "terse_digits"));
}

// The wrapping reducer around exact: training is exact's, bit for bit, and each rank's table names
// every parameter with what it sent, measured before exact's in-place all-reduce.
TEST(Plugins, AWrappingReducerRecordsEachParameterByName) {
  TempDir dir;
  const std::string common = " --nproc-per-node 2 --set task.synthetic=true --set training.max_steps=3";
  const auto wrapped =
      gcrun("experiment fashion-sgd " + kRecording + common + " --output-dir " + dir.file("wrapped") +
            " --set reducer.name=recording --set reducer.inner=exact --set reducer.record_to=" + dir.file("records"));
  ASSERT_EQ(wrapped.exit_code, 0) << wrapped.output;
  const auto plain = gcrun("experiment fashion-sgd" + common + " --output-dir " + dir.file("plain"));
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  for (const char* metric : {"\"cross_entropy\"", "\"accuracy\""}) {
    const auto expected = linesWith(readFile(dir.file("plain") + "/metrics.jsonl"), metric);
    ASSERT_FALSE(expected.empty());
    EXPECT_EQ(linesWith(readFile(dir.file("wrapped") + "/metrics.jsonl"), metric), expected);
  }
  const auto rank0 = readFile(dir.file("records") + "/recording-rank0.tsv");
  const auto rank1 = readFile(dir.file("records") + "/recording-rank1.tsv");
  for (const auto* table : {&rank0, &rank1}) {
    for (const char* name : {"conv1.weight", "conv1.bias", "conv2.weight", "fc1.weight", "fc2.bias"}) {
      EXPECT_EQ(recordOf(*table, name).size(), 5u) << name << "\n" << *table;
    }
    // 32 x 1 x 3 x 3 floats, in 3 calls.
    const auto conv1 = recordOf(*table, "conv1.weight");
    ASSERT_EQ(conv1.size(), 5u) << *table;
    EXPECT_EQ(conv1[1], "32x1x3x3");
    EXPECT_EQ(conv1[2], "3");
    EXPECT_EQ(conv1[3], std::to_string(3 * 288 * 4));
    EXPECT_TRUE(contains(*table, "# exact sent ")) << *table;
  }
  // Each worker's own gradient: after the all-reduce both ranks would hold the same sum.
  EXPECT_NE(recordOf(rank0, "conv1.weight")[4], recordOf(rank1, "conv1.weight")[4]);
  // A bad inner reducer is the user's error, naming the key.
  const auto bad = gcrun("experiment fashion-sgd " + kRecording + " --output-dir " + dir.file("bad") +
                         " --set reducer.name=recording --set reducer.inner=nope --set task.synthetic=true");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_TRUE(contains(bad.output, "reducer.inner: 'nope'")) << bad.output;
}

// The benchmark hands reducers the parameters' names too: ResNet-18's.
TEST(Plugins, TheBenchmarkNamesTheParameters) {
  TempDir dir;
  const auto result = gcrun("bench reducers " + kRecording +
                            " --reducer recording --workers 1 --repeats 1"
                            " --warmup 0 --set reducer.record_to=" +
                            dir.file("records"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto table = readFile(dir.file("records") + "/recording-rank0.tsv");
  const auto layer = recordOf(table, "layer1.0.conv1.weight");
  ASSERT_EQ(layer.size(), 5u) << table;
  EXPECT_EQ(layer[1], "64x64x3x3");
}

TEST(ListReducers, ShowsCollectiveMemoryGranularityAndDefaults) {
  const auto result = gcrun("list reducers");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::stringstream stream(result.output);
  std::string line, block;
  bool in_powersgd = false;
  while (std::getline(stream, line)) {
    if (line.rfind("  ", 0) == 0 && line.size() > 2 && line[2] != ' ') in_powersgd = line.rfind("  powersgd ", 0) == 0;
    if (in_powersgd) block += line + "\n";
  }
  EXPECT_TRUE(contains(block, "all-reduce; error feedback: yes; granularity: layer, model, bucket")) << block;
  EXPECT_TRUE(contains(block, "reducer.rank = 4")) << block;
  EXPECT_TRUE(contains(block, "reducer.reuse_query = true")) << block;
}

TEST(Bench, OneReducerOneWorkerPrintsJson) {
  const auto result = gcrun("bench reducers --json --reducer exact --workers 1 --repeats 1 --warmup 0");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(contains(result.output, "\"model\": \"resnet18\"")) << result.output;
  EXPECT_TRUE(contains(result.output, "\"compression_ratio\": 1")) << result.output;
  expectUserError(gcrun("bench reducers --reducer nope"), "unknown reducer 'nope'");
}

}  // namespace
