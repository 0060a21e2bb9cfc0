// `gcrun show NAME --sources` and run.json's "sources", through the binary as a user runs them.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "outputs/run_info.h"
#include "tests/support/command.h"
#include "tests/support/temp_dir.h"

namespace {

using gcrun::testing::contains;
using gcrun::testing::TempDir;

gcrun::testing::CommandResult gcrun(const std::string& arguments) {
  return gcrun::testing::runCommand(std::string(GCRUN_BINARY_PATH) + " " + arguments);
}

TEST(ShowSources, EachLineNamesTheLayerOfItsValue) {
  TempDir dir;
  std::ofstream(dir.file("over.yaml")) << "seed: 5\ntraining:\n  batch_size: 16\n  epochs: 2\n";
  const auto shown = gcrun("show fashion-sgd --sources --config " + dir.file("over.yaml") + " --set training.epochs=4");
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  const auto& text = shown.output;
  const auto line = [&](const std::string& start) {
    const auto at = text.find("\n" + start);
    return at == std::string::npos ? std::string() : text.substr(at + 1, text.find('\n', at + 1) - at - 1);
  };
  EXPECT_TRUE(contains(line("task.synthetic: false"), "# default")) << text;
  EXPECT_TRUE(contains(line("reducer.name: exact"), "# preset fashion-sgd")) << text;
  EXPECT_TRUE(contains(line("seed: 5"), "# --config " + dir.file("over.yaml") + ":1")) << text;
  EXPECT_TRUE(contains(line("training.batch_size: 16"), "# --config " + dir.file("over.yaml") + ":3")) << text;
  EXPECT_TRUE(contains(line("training.epochs: 4"), "# --set training.epochs=4")) << text;
  // Without --sources, show prints the nested YAML it always did.
  const auto plain = gcrun("show fashion-sgd");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_TRUE(contains(plain.output, "training:\n")) << plain.output;
  EXPECT_FALSE(contains(plain.output, "# preset")) << plain.output;
}

TEST(ShowSources, RunJsonRecordsTheSameSources) {
  TempDir dir;
  std::ofstream(dir.file("over.yaml")) << "training:\n  batch_size: 32\n";
  const auto run =
      gcrun("experiment fashion-sgd --output-dir " + dir.file("run") + " --config " + dir.file("over.yaml") +
            " --set task.synthetic=true --set training.max_steps=2 --set task.test_batch_size=500"
            " --set evaluation.max_samples=64 --set output.sinks=[jsonl]");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto info = gcrun::outputs::parseRunInfo(gcrun::testing::readFile(dir.file("run/run.json")));
  ASSERT_TRUE(info.has_value());
  const auto& sources = info->sources;
  EXPECT_EQ(sources.at("training.batch_size"), "--config " + dir.file("over.yaml") + ":2");
  EXPECT_EQ(sources.at("training.max_steps"), "--set training.max_steps=2");
  EXPECT_EQ(sources.at("reducer.name"), "preset fashion-sgd");
  EXPECT_EQ(sources.at("seed"), "default");
  const auto shown = gcrun("show fashion-sgd --sources --config " + dir.file("over.yaml"));
  EXPECT_TRUE(contains(shown.output, "# --config " + dir.file("over.yaml") + ":2\n")) << shown.output;
}

}  // namespace
