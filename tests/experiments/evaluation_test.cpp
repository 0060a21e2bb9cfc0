// The evaluations of a run, through the binary: evaluation.every_epochs, the keys in `gcrun show`
// and `gcrun list keys`, synthetic runs' small test split, and a stop signal during an evaluation.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include <yaml-cpp/yaml.h>

#include "tests/support/command.h"
#include "tests/support/temp_dir.h"

namespace gcrun {
namespace {

using testing::contains;
using testing::readFile;
using testing::runCommand;
using testing::startInBackground;
using testing::TempDir;
using Clock = std::chrono::steady_clock;

const std::string kGcrun = GCRUN_BINARY_PATH;

// The steps at which metrics.jsonl has events of `split`.
std::set<int64_t> stepsWith(const std::string& run_dir, const std::string& split) {
  std::set<int64_t> steps;
  std::istringstream lines(readFile(run_dir + "/metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const auto event = YAML::Load(line);
    if (event["split"].as<std::string>() == split) steps.insert(event["step"].as<int64_t>());
  }
  return steps;
}

TEST(Evaluation, KeysAreListedShownAndChecked) {
  const auto keys = runCommand(kGcrun + " list keys");
  EXPECT_TRUE(contains(keys.output, "evaluation.max_samples") && contains(keys.output, "evaluation.every_epochs"))
      << keys.output;
  const auto shown = runCommand(kGcrun + " show fashion-sgd --set evaluation.max_samples=100");
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_TRUE(contains(shown.output, "evaluation:\n  max_samples: 100\n  every_epochs: 1")) << shown.output;
  const auto refused = runCommand(kGcrun + " show fashion-sgd --set evaluation.every_epochs=0");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_TRUE(contains(refused.output, "evaluation.every_epochs")) << refused.output;
}

// 10 steps an epoch: the test split is evaluated after epochs 2 and 3 (the last), the training
// metrics after every epoch.
TEST(Evaluation, EveryEpochsSkipsEpochsButNotTheLast) {
  TempDir dir;
  const std::string run = dir.file("run");
  const auto result = runCommand(kGcrun + " experiment fashion-sgd --output-dir " + run +
                                 " --set task.synthetic=true --set task.synthetic_samples=640"
                                 " --set training.batch_size=64 --set training.epochs=3"
                                 " --set evaluation.every_epochs=2 --set output.sinks=[console,jsonl]");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(stepsWith(run, "test"), (std::set<int64_t>{20, 30}));
  EXPECT_EQ(stepsWith(run, "train").count(10), 1u);
  EXPECT_TRUE(contains(result.output, "small synthetic held-out splits")) << result.output;
}

// ResNet-18 on 10,000 synthetic test images takes a minute or more on a CPU: SIGTERM during that
// evaluation ends the run within seconds, with the checkpoint of its last step and no test metrics.
TEST(Evaluation, SigtermDuringTheEvaluationStopsWithinSeconds) {
  TempDir dir;
  const std::string run = dir.file("run");
  const std::string log = dir.file("launch.log");
  const pid_t launcher = startInBackground(
      kGcrun + " experiment cifar-sgd --nproc-per-node 2 --output-dir " + run +
          " --set task.synthetic=true --set task.synthetic_samples=50000 --set training.batch_size=4"
          " --set training.max_steps=1 --set output.sinks=[console,jsonl] --set distributed.timeout_s=60",
      log);
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (!contains(readFile(log), "step 1/1") && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(contains(readFile(log), "step 1/1")) << readFile(log);
  std::this_thread::sleep_for(std::chrono::seconds(2));  // into the evaluation
  const auto signalled = Clock::now();
  ::kill(launcher, SIGTERM);
  int status = 0;
  while (::waitpid(launcher, &status, WNOHANG) == 0 && Clock::now() - signalled < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const auto took = Clock::now() - signalled;
  EXPECT_LT(took, std::chrono::seconds(10)) << readFile(log);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM) << readFile(log);
  const auto info = YAML::LoadFile(run + "/run.json");
  EXPECT_EQ(info["status"].as<std::string>(), "interrupted");
  EXPECT_EQ(YAML::LoadFile(run + "/checkpoints/manifest.json")["step"].as<int64_t>(), 1);
  EXPECT_TRUE(stepsWith(run, "test").empty()) << "a cut-short evaluation reports nothing";
}

}  // namespace
}  // namespace gcrun
