// The completion scripts as a shell loads them: bash sources `gcrun completion bash` and its
// function answers for the line being typed (COMP_LINE, COMP_POINT, COMP_WORDS, COMP_CWORD, as
// bash sets them); zsh, where installed, parses the zsh script.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/command.h"
#include "tests/support/temp_dir.h"

namespace {

using gcrun::testing::runCommand;
using gcrun::testing::TempDir;

const std::string kGcrun = GCRUN_BINARY_PATH;

// The script saved once, so that each shell sources a file.
class Completion : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* shell : {"bash", "zsh"}) {
      const auto printed = runCommand(kGcrun + " completion " + shell);
      ASSERT_EQ(printed.exit_code, 0) << printed.output;
      std::ofstream(dir_.file(shell)) << printed.output;
    }
  }

  // COMPREPLY after bash's completion of `line` (gcrun's path and then `line`), cursor at its end.
  std::vector<std::string> complete(const std::string& line) const {
    std::ofstream(dir_.file("line")) << kGcrun + " " + line;
    std::ofstream(dir_.file("complete.sh")) << "source " << dir_.file("bash") << "\n"
                                            << "IFS= read -r -d '' COMP_LINE < " << dir_.file("line") << "\n"
                                            << "COMP_POINT=${#COMP_LINE}\n"
                                            << "read -r -a COMP_WORDS <<<\"$COMP_LINE\"\n"
                                            << "COMP_CWORD=${#COMP_WORDS[@]}\n"
                                            << "[[ $COMP_LINE =~ [[:space:]]$ ]] || COMP_CWORD=$((COMP_CWORD - 1))\n"
                                            << "_gcrun\n"
                                            << "printf '%s\\n' \"${COMPREPLY[@]}\"\n";
    const auto result = runCommand("bash " + dir_.file("complete.sh"));
    EXPECT_EQ(result.exit_code, 0) << result.output;
    std::vector<std::string> words;
    std::stringstream stream(result.output);
    for (std::string word; std::getline(stream, word);) {
      if (!word.empty()) words.push_back(word);
    }
    return words;
  }

  TempDir dir_;
};

bool has(const std::vector<std::string>& words, const std::string& word) {
  return std::find(words.begin(), words.end(), word) != words.end();
}

bool allStartWith(const std::vector<std::string>& words, const std::string& prefix) {
  return std::all_of(words.begin(), words.end(), [&](const std::string& w) { return w.rfind(prefix, 0) == 0; });
}

TEST_F(Completion, BashRegistersTheFunction) {
  const auto result = runCommand("bash -c 'source <(" + kGcrun + " completion bash); complete -p gcrun'");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output, "complete -o default -F _gcrun gcrun\n");
}

TEST_F(Completion, SubcommandsAfterTheProgram) {
  const auto words = complete("");
  for (const char* command : {"experiment", "show", "study", "list", "report", "completion"}) {
    EXPECT_TRUE(has(words, command)) << command;
  }
  EXPECT_EQ(complete("sh"), std::vector<std::string>{"show"});
}

TEST_F(Completion, FlagsFromTheCommandItself) {
  const auto words = complete("experiment --");
  for (const char* flag : {"--set", "--config", "--plugin", "--nproc-per-node", "--resume", "--help"}) {
    EXPECT_TRUE(has(words, flag)) << flag;
  }
  EXPECT_TRUE(allStartWith(words, "--"));
  EXPECT_TRUE(has(complete("show --so"), "--sources"));
  // The scripts' own question is no flag a user types.
  EXPECT_FALSE(has(complete("completion --"), "--words"));
  // Nor is what gcrun's launcher hands its workers.
  EXPECT_FALSE(has(complete("experiment --"), "--resolved"));
}

TEST_F(Completion, BenchsSubcommandsAndTheirFlags) {
  const auto kinds = complete("bench ");
  EXPECT_TRUE(has(kinds, "reducers") && has(kinds, "network"));
  EXPECT_TRUE(has(complete("bench network --max"), "--max-bytes"));
  EXPECT_TRUE(has(complete("bench network --rdzv"), "--rdzv-endpoint"));
  EXPECT_TRUE(has(complete("bench reducers --js"), "--json"));
  EXPECT_FALSE(has(complete("bench reducers --"), "--max-bytes"));
}

TEST_F(Completion, PresetAndStudyNames) {
  const auto presets = complete("experiment fashion-");
  EXPECT_TRUE(has(presets, "fashion-sgd"));
  EXPECT_TRUE(has(presets, "fashion-powersgd-rank2"));
  EXPECT_TRUE(allStartWith(presets, "fashion-"));
  EXPECT_TRUE(has(complete("study "), "fashion-ranks"));
  EXPECT_TRUE(complete("experiment --config ").empty());  // a file: bash offers files (-o default)
}

TEST_F(Completion, SetKeysAndTheirValues) {
  const auto keys = complete("experiment --set red");
  EXPECT_TRUE(has(keys, "reducer.name="));
  EXPECT_TRUE(has(keys, "reducer.granularity="));
  EXPECT_TRUE(has(keys, "reducer.rank="));  // a reducer's own setting
  EXPECT_TRUE(allStartWith(keys, "reducer."));
  // Readline replaces what follows the '=', so the values come without the key.
  const auto reducers = complete("experiment --set reducer.name=");
  EXPECT_TRUE(has(reducers, "powersgd"));
  EXPECT_TRUE(has(reducers, "exact"));
  EXPECT_EQ(complete("experiment fashion-sgd --set reducer.granularity=bu"), std::vector<std::string>{"bucket"});
  EXPECT_EQ(complete("show fashion-sgd --set optimizer.memory=t"), std::vector<std::string>{"true"});
  EXPECT_EQ(complete("experiment --set=reducer.name=powers"), (std::vector<std::string>{"powersgd", "powersgd-ddp"}));
  EXPECT_TRUE(has(complete("study fashion-ranks --set output.sinks="), "jsonl"));
}

TEST_F(Completion, OptimizerScheduleAndStrategyNames) {
  EXPECT_EQ(complete("experiment fashion-sgd --set optimizer.name="), (std::vector<std::string>{"adamw", "sgd"}));
  EXPECT_EQ(complete("show fashion-sgd --set optimizer.name=ad"), std::vector<std::string>{"adamw"});
  EXPECT_EQ(complete("experiment --set optimizer.schedule="), (std::vector<std::string>{"cosine", "reference"}));
  EXPECT_EQ(complete("study fashion-ranks --set=optimizer.schedule=co"), std::vector<std::string>{"cosine"});
  const auto strategies = complete("experiment --set sync.strategy=");
  for (const char* strategy : {"every-step", "local-sgd", "diloco", "streaming-diloco", "sparseloco", "demo"}) {
    EXPECT_TRUE(has(strategies, strategy)) << strategy;
  }
  EXPECT_EQ(complete("experiment --set sync.strategy=streaming"), std::vector<std::string>{"streaming-diloco"});
}

TEST_F(Completion, WhatListLists) {
  const auto listings = complete("list ");
  for (const char* what :
       {"experiments", "studies", "reducers", "strategies", "optimizers", "tasks", "sinks", "keys"}) {
    EXPECT_TRUE(has(listings, what)) << what;
  }
  EXPECT_EQ(complete("list op"), std::vector<std::string>{"optimizers"});
  EXPECT_TRUE(has(complete("list keys --"), "--markdown"));
}

#ifdef GCRUN_PLUGIN_PATH
TEST_F(Completion, APluginOnTheLineAddsItsKeys) {
  EXPECT_TRUE(complete("experiment --set reducer.int8").empty());
  const auto keys = complete(std::string("experiment --plugin ") + GCRUN_PLUGIN_PATH + " --set reducer.int8");
  EXPECT_TRUE(has(keys, "reducer.int8_levels=")) << keys.size();
  EXPECT_TRUE(
      has(complete(std::string("experiment --plugin ") + GCRUN_PLUGIN_PATH + " --set reducer.name=in"), "int8-sum"));
}
#endif

TEST_F(Completion, ZshParsesItsScript) {
  if (runCommand("command -v zsh").exit_code != 0) GTEST_SKIP() << "zsh is not installed";
  const auto result = runCommand("zsh -n " + dir_.file("zsh"));
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

TEST(CompletionCommand, RefusesAnUnknownShell) {
  const auto result = runCommand(kGcrun + " completion fish");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("accepted: bash, zsh"), std::string::npos) << result.output;
}

}  // namespace
