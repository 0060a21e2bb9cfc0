// The gcrun binary with a user's reducer plugin (examples/reducer_plugin.cpp), the reducer listing
// and the reducer benchmark, run as a user would.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "tests/support/temp_dir.h"

namespace {

using gcrun::testing::TempDir;

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

CommandResult gcrun(const std::string& arguments) {
  CommandResult result;
  FILE* pipe = ::popen((std::string(GCRUN_BINARY_PATH) + " " + arguments + " 2>&1").c_str(), "r");
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

size_t lineCount(const std::string& text) {
  std::stringstream stream(text);
  size_t count = 0;
  for (std::string line; std::getline(stream, line);) count += line.empty() ? 0 : 1;
  return count;
}

const std::string kPlugin = std::string("--plugin ") + GCRUN_PLUGIN_PATH;

TEST(Plugins, ListShowsThePluginReducer) {
  const auto result = gcrun("list reducers " + kPlugin);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(contains(result.output, "int8")) << result.output;
  EXPECT_TRUE(contains(result.output, "8-bit all-reduce")) << result.output;
  // The built-ins are still there.
  EXPECT_TRUE(contains(result.output, "powersgd")) << result.output;
  EXPECT_FALSE(contains(gcrun("list reducers").output, "int8"));
}

TEST(Plugins, TwoWorkersTrainWithThePluginReducer) {
  TempDir dir;
  const std::string run_dir = dir.file("run");
  const auto result = gcrun("experiment fashion-sgd " + kPlugin + " --nproc-per-node 2 --output-dir " + run_dir +
                            " --set reducer.name=int8 --set reducer.int8_levels=60 --set task.synthetic=true"
                            " --set training.max_steps=3");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto config = YAML::LoadFile(run_dir + "/config.yaml");
  EXPECT_EQ(config["reducer"]["name"].as<std::string>(), "int8");
  EXPECT_EQ(config["reducer"]["int8_levels"].as<int>(), 60);
  std::ifstream run_json(run_dir + "/run.json");
  std::stringstream text;
  text << run_json.rdbuf();
  EXPECT_TRUE(contains(text.str(), "\"completed\"")) << text.str();
  EXPECT_TRUE(contains(text.str(), "\"steps\": 3")) << text.str();
}

// The plugin's own setting, declared next to its reducer, works like a built-in key.
TEST(Plugins, ThePluginDeclaresItsOwnSetting) {
  const auto shown = gcrun("show fashion-sgd " + kPlugin + " --set reducer.name=int8 --set reducer.int8_levels=60");
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
                              " --set reducer.name=int8 --set reducer.int8_levels=127 --set task.synthetic=true"
                              " --set training.max_steps=1 --output-dir " + dir.file("run"));
  EXPECT_EQ(overflow.exit_code, 2) << overflow.output;
  EXPECT_TRUE(contains(overflow.output, "reducer.int8_levels: 127 with 1 workers")) << overflow.output;
}

TEST(Plugins, ShowAcceptsThePluginOption) {
  const auto result = gcrun("show fashion-sgd " + kPlugin + " --set reducer.name=int8");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(contains(result.output, "int8")) << result.output;
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
