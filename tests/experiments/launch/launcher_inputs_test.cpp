// What gcrun's launcher takes from its environment and from a stopped or finished launch: a TMPDIR
// it cannot use, a directory that a signal stopped before its run began, a resume without
// --nproc-per-node, and the `sources` of a --resolved file, which run.json copies.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/command.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace {

using gcrun::testing::contains;
using gcrun::testing::gcrunLines;
using gcrun::testing::readFile;
using gcrun::testing::runCommand;
using gcrun::testing::TempDir;

const std::string kGcrun = GCRUN_BINARY_PATH;
const std::string kQuick =
    " --set task.synthetic=true --set training.batch_size=32 --set output.sinks=[jsonl]"
    " --set task.test_batch_size=500 --set evaluation.max_samples=500 --set training.max_steps=2";

nlohmann::json runInfo(const std::string& run) { return nlohmann::json::parse(readFile(run + "/run.json")); }

// Before: exit 1 ("launcher: cannot create a private directory in /nonexistent/gcrun-...") and an
// empty output directory.
TEST(LauncherInputs, ATmpdirThatCannotBeUsedIsNamedAndNoEmptyDirectoryIsLeft) {
  TempDir dir;
  const std::string run = dir.file("run");
  const auto result = runCommand("env TMPDIR=" + dir.file("missing") + " " + kGcrun +
                                 " experiment fashion-sgd --nproc-per-node 2" + " --output-dir " + run + kQuick);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  const auto lines = gcrunLines(result.output);
  ASSERT_EQ(lines.size(), 1u) << result.output;
  EXPECT_TRUE(contains(lines[0], "gcrun: error: TMPDIR=" + dir.file("missing") + ": ")) << lines[0];
  // The refusal is recorded where the run was asked for, as for any refused run.
  EXPECT_EQ(runInfo(run).at("status"), "refused");
}

// Before: a SIGINT in the launch's first second left only workers.json, which neither --resume nor
// a rerun into the same --output-dir accepted ("already holds files").
TEST(LauncherInputs, ADirectoryStoppedBeforeItsRunBeganTakesARerun) {
  TempDir dir;
  const std::string run = dir.file("run");
  gcrun::testing::Process launch(kGcrun + " experiment fashion-sgd --nproc-per-node 2 --output-dir " + run + kQuick,
                                 dir.file("stopped.log"));
  ASSERT_TRUE(gcrun::testing::waitFor([&] { return std::filesystem::exists(run + "/workers.json"); },
                                      std::chrono::seconds(60)));
  ::kill(launch.pid(), SIGINT);
  EXPECT_EQ(launch.wait(std::chrono::seconds(60)), 128 + SIGINT) << launch.output();
  ASSERT_FALSE(std::filesystem::exists(run + "/run.json")) << "the run began before the signal: nothing to test";

  const auto rerun = runCommand(kGcrun + " experiment fashion-sgd --nproc-per-node 2 --output-dir " + run + kQuick);
  EXPECT_EQ(rerun.exit_code, 0) << rerun.output;
  EXPECT_EQ(runInfo(run).at("status"), "completed");
}

// Before: "its checkpoint was written by 2 workers, this launch has 1", exit 2.
TEST(LauncherInputs, AResumeOnOneMachineTakesTheSavedWorkerCount) {
  TempDir dir;
  const std::string run = dir.file("run");
  const auto first = runCommand(kGcrun + " experiment fashion-sgd --nproc-per-node 2 --output-dir " + run + kQuick);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto resumed = runCommand(kGcrun + " experiment fashion-sgd --resume " + run + " --set training.max_steps=3");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  const auto info = runInfo(run);
  EXPECT_EQ(info.at("world_size"), 2);
  EXPECT_EQ(info.at("steps"), 3);
  // Given, --nproc-per-node is still checked against the checkpoint.
  const auto other =
      runCommand(kGcrun + " experiment fashion-sgd --nproc-per-node 3 --resume " + run + " --set training.max_steps=4");
  EXPECT_EQ(other.exit_code, 2) << other.output;
  EXPECT_TRUE(contains(other.output, "written by 2 workers, this launch has 3")) << other.output;
}

// Before: any map under `sources` reached run.json as it was.
TEST(LauncherInputs, AResolvedFilesSourcesAreChecked) {
  TempDir dir;
  const struct {
    std::string sources, named;
  } cases[] = {
      {"{no.such.key: default}", "its sources entry 'no.such.key' is no configuration key"},
      {"{seed: '<script>alert(1)</script>'}",
       "its sources entry 'seed' says '<script>alert(1)</script>', which is none"},
  };
  for (const auto& c : cases) {
    const std::string file = dir.file("resolved.yaml");
    std::ofstream(file) << "config: \"seed: 1\\n\"\nsources: " << c.sources << "\n";
    // In the test's folder: a file that passed would train into runs/ there.
    const auto result = runCommand("cd " + dir.path().string() + " && " + kGcrun + " experiment --resolved=" + file +
                                   " -- fashion-sgd");
    EXPECT_EQ(result.exit_code, 2) << result.output;
    const auto lines = gcrunLines(result.output);
    ASSERT_EQ(lines.size(), 1u) << result.output;
    EXPECT_TRUE(contains(lines[0], "--resolved " + file + ": " + c.named)) << lines[0];
  }
}

}  // namespace
