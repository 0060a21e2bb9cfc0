// Runs the gcrun binary as a user would, and reads what it leaves behind.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "tests/support/temp_dir.h"

namespace {

using gcrun::testing::TempDir;

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

CommandResult run(const std::string& binary, const std::string& arguments) {
  CommandResult result;
  FILE* pipe = ::popen((binary + " " + arguments + " 2>&1").c_str(), "r");
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

CommandResult gcrun(const std::string& arguments) { return run(GCRUN_BINARY_PATH, arguments); }

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream stream(text);
  for (std::string line; std::getline(stream, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// One line on stderr, naming what is wrong, and exit code 2.
void expectUserError(const CommandResult& result, const std::string& expected_part) {
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_EQ(lines(result.output).size(), 1u) << result.output;
  EXPECT_TRUE(contains(result.output, expected_part)) << result.output;
}

TEST(EndToEnd, TwoWorkersWriteEveryOutputFile) {
  TempDir dir;
  const std::string run_dir = dir.file("run");
  auto result = gcrun("experiment fashion-powersgd-rank2 --nproc-per-node 2 --output-dir " + run_dir +
                      " --set training.max_steps=5 --set optimizer_reducer_rank=2");
  ASSERT_EQ(result.exit_code, 0) << result.output;

  const auto config = YAML::LoadFile(run_dir + "/config.yaml");
  EXPECT_EQ(config["reducer"]["name"].as<std::string>(), "powersgd");
  EXPECT_EQ(config["training"]["max_steps"].as<int>(), 5);

  const auto metrics = lines(readFile(run_dir + "/metrics.jsonl"));
  ASSERT_FALSE(metrics.empty());
  bool test_accuracy = false;
  for (const auto& line : metrics) {
    for (const char* field : {"\"name\"", "\"value\"", "\"split\"", "\"epoch\"", "\"step\"", "\"bits\""}) {
      EXPECT_TRUE(contains(line, field)) << line;
    }
    test_accuracy |= contains(line, "\"accuracy\"") && contains(line, "\"test\"");
  }
  EXPECT_TRUE(test_accuracy);

  const auto csv = lines(readFile(run_dir + "/epochs.csv"));
  ASSERT_EQ(csv.size(), 2u);  // header and the one (partial) epoch
  EXPECT_TRUE(contains(csv[0], "test_accuracy")) << csv[0];

  const auto timers = YAML::LoadFile(run_dir + "/timer_summary.json");
  EXPECT_EQ(timers["batch"]["n_events"].as<int>(), 4);  // the first of 5 is skipped, as the reference does
  EXPECT_GT(timers["batch.reduce"]["average_duration"].as<double>(), 0.0);

  const auto info = YAML::LoadFile(run_dir + "/run.json");
  EXPECT_EQ(info["status"].as<std::string>(), "completed");
  EXPECT_EQ(info["world_size"].as<int>(), 2);
  EXPECT_EQ(info["backend"].as<std::string>(), "gloo");
  EXPECT_EQ(info["steps"].as<int>(), 5);
  EXPECT_EQ(info["num_parameters"].as<int64_t>(), 421642);  // the fashion CNN
  // Rank-2 PowerSGD on the CNN: conv1 [32,9] 2*(32+9), conv2 [64,288] 2*(64+288),
  // fc1 [128,3136] 2*(128+3136), fc2 [10,128] 2*(10+128), biases 32+64+128+10.
  const uint64_t floats_per_step = 2 * (32 + 9) + 2 * (64 + 288) + 2 * (128 + 3136) + 2 * (10 + 128) + 234;
  EXPECT_EQ(info["bits_sent"].as<uint64_t>(), 5 * 32 * floats_per_step);

  EXPECT_TRUE(std::filesystem::exists(run_dir + "/rank-0.log"));
  EXPECT_TRUE(std::filesystem::exists(run_dir + "/rank-1.log"));
}

TEST(EndToEnd, ListShowVersionAndHelp) {
  auto list = gcrun("list");
  EXPECT_EQ(list.exit_code, 0);
  EXPECT_TRUE(contains(list.output, "fashion-powersgd-rank4")) << list.output;
  auto reducers = gcrun("list reducers");
  EXPECT_TRUE(contains(reducers.output, "powersgd")) << reducers.output;
  auto show = gcrun("show fashion-sgd --set training.epochs=11");
  EXPECT_EQ(show.exit_code, 0);
  EXPECT_EQ(YAML::Load(show.output)["training"]["epochs"].as<int>(), 11);
  EXPECT_EQ(gcrun("--version").exit_code, 0);
  EXPECT_EQ(gcrun("experiment --help").exit_code, 0);
}

// Switching a preset to a strategy that needs other settings: one message names them all, and the
// flags it suggests make the run go.
TEST(EndToEnd, AStrategyRefusesEveryIncompatibleSettingAtOnceWithTheFlagsThatFixThem) {
  TempDir dir;
  const std::string run = "experiment brown-gpt-fp16 --set sync.strategy=demo --set task.synthetic=true";
  const auto refused = gcrun(run);
  expectUserError(refused, "sync.strategy=demo needs 4 settings changed: ");
  const auto add = refused.output.find("; add ");
  const auto example = refused.output.find(" (as the run", add);
  ASSERT_NE(add, std::string::npos) << refused.output;
  ASSERT_NE(example, std::string::npos) << refused.output;
  const auto flags = refused.output.substr(add + 6, example - add - 6);
  for (const std::string key :
       {"optimizer.name", "optimizer.momentum=", "optimizer.momentum_type", "optimizer.clip_norm"}) {
    EXPECT_TRUE(contains(flags, "--set " + key)) << key << " in " << flags;
  }
  const auto fixed = gcrun(run + " " + flags + " --set training.max_steps=1 --set evaluation.max_samples=64" +
                           " --output-dir " + dir.file("run"));
  EXPECT_EQ(fixed.exit_code, 0) << fixed.output;
}

TEST(EndToEnd, BadInputExitsTwoWithOneLine) {
  TempDir dir;
  expectUserError(gcrun("experiment fashion-sgd --set training.epoch=3"), "training.epochs");
  expectUserError(gcrun("experiment fashion-sgd --set training.epochs=zero"), "training.epochs");
  expectUserError(gcrun("experiment no-such-preset"), "fashion-sgd");
  expectUserError(gcrun("experiment fashion-sgd --set reducer.name=nope"), "powersgd");
  expectUserError(gcrun("experiment fashion-sgd --set optimizer.name=adam"), "optimizer.name: unknown optimizer");
  expectUserError(gcrun("experiment fashion-sgd --set optimizer.schedule=step"), "optimizer.schedule");
  expectUserError(gcrun("experiment fashion-sgd --set optimizer.name=adamw --set optimizer.mom_before_reduce=true"),
                  "optimizer.mom_before_reduce");
  expectUserError(gcrun("experiment fashion-sgd --set optimizer.warmup_steps=9 --set optimizer.decay_steps=3"),
                  "optimizer.warmup_steps");
  expectUserError(gcrun("experiment fashion-sgd --set optimizer.beta2=1"), "optimizer.beta2");
  expectUserError(gcrun("experiment fashion-sgd --config " + dir.file("missing.yaml")), "missing.yaml");
  expectUserError(gcrun("experiment fashion-sgd --nproc-per-node 0"), "nproc-per-node");
  expectUserError(gcrun("frobnicate"), "frobnicate");
  expectUserError(
      gcrun("experiment fashion-sgd --output-dir " + dir.file("data") + " --set task.data_dir=" + dir.file("data")),
      "dataset-fashion-mnist");
  std::filesystem::create_directories(dir.file("busy"));
  std::ofstream(dir.file("busy/file")) << "x";
  expectUserError(gcrun("experiment fashion-sgd --output-dir " + dir.file("busy")), "busy");
}

TEST(EndToEnd, MissingDataStopsTheLaunchBeforeAnyWorkerStarts) {
  TempDir dir;
  // The launcher builds the task once to check it: one line, no worker starts, and the directory
  // given holds the refusal only, for whoever started the run (a study) to read.
  auto result = gcrun("experiment fashion-sgd --nproc-per-node 2 --output-dir " + dir.file("run") +
                      " --set task.data_dir=" + dir.file("nowhere"));
  expectUserError(result, "dataset-fashion-mnist");
  std::vector<std::string> entries;
  for (const auto& entry : std::filesystem::directory_iterator(dir.file("run"))) {
    entries.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(entries, std::vector<std::string>{"run.json"});
  const auto info = YAML::LoadFile(dir.file("run/run.json"));
  EXPECT_EQ(info["status"].as<std::string>(), "refused");
  EXPECT_TRUE(contains(info["error"].as<std::string>(), "dataset-fashion-mnist")) << info["error"];
  // Without --output-dir no directory is made for a refusal.
  result = run("cd " + dir.path().string() + " && " + std::string(GCRUN_BINARY_PATH),
               "experiment fashion-sgd --nproc-per-node 2 --set task.data_dir=" + dir.file("nowhere"));
  expectUserError(result, "dataset-fashion-mnist");
  EXPECT_FALSE(std::filesystem::exists(dir.file("runs")));
}

}  // namespace
