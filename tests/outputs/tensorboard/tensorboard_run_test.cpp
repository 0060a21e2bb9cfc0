// A real run with the tensorboard sink on, its tb/ file checked by read_tfevents.py, which shares
// no code with gcrun: framing, CRCs, protobuf decoding, every scalar against metrics.jsonl and
// layers.csv, HParams.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/outputs/tensorboard/python_reader.h"
#include "tests/support/command.h"
#include "tests/support/temp_dir.h"

namespace gcrun::testing {
namespace {

TEST(TensorboardRun, AnIndependentReaderFindsEveryMetricAndTheHParams) {
  TempDir dir;
  const std::string run_dir = dir.file("run");
  // Two simulated workers, so that PowerSGD compresses and the compression metrics are logged.
  const auto run =
      runCommand(std::string(GCRUN_BINARY_PATH) + " experiment fashion-powersgd-rank2 --output-dir " + run_dir +
                 " --set task.synthetic=true --set task.synthetic_samples=512 --set training.epochs=2"
                 " --set output.log_every_steps=2 --set distributed.simulated_workers=2"
                 " --set evaluation.max_samples=256 --set output.layer_stats_every_steps=3"
                 " --set 'output.sinks=[jsonl,tensorboard]'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_TRUE(std::filesystem::is_directory(run_dir + "/tb")) << run.output;

  const auto read = runEventReader(run_dir +
                                   " --hparam reducer.name=powersgd --hparam reducer.rank=2 --hparam seed=42"
                                   " --hparam optimizer.learning_rate=0.01 --hparam distributed.simulated_workers=2"
                                   " --hparam experiment=fashion-powersgd-rank2 --hparam optimizer.memory=true");
  if (!read.skip.empty()) GTEST_SKIP() << read.skip;
  EXPECT_EQ(read.command.exit_code, 0) << read.command.output;
  for (const char* tag :
       {"train/cross_entropy", "train/learning_rate", "train/epoch_accuracy", "test/accuracy",
        "compression/rel_compression_error", "comm/mib_sent", "time/batch_ms", "layers/conv1.weight/grad_norm",
        "layers/fc1.weight/rel_compression_error", "layers/fc2.bias/bits"}) {
    EXPECT_TRUE(contains(read.command.output, tag)) << tag << "\n" << read.command.output;
  }
}

TEST(TensorboardRun, IsOffByDefault) {
  TempDir dir;
  const std::string run_dir = dir.file("run");
  const auto run = runCommand(std::string(GCRUN_BINARY_PATH) + " experiment fashion-sgd --output-dir " + run_dir +
                              " --set task.synthetic=true --set task.synthetic_samples=128 --set training.max_steps=1"
                              " --set evaluation.max_samples=64");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(std::filesystem::exists(run_dir + "/metrics.jsonl"));
  EXPECT_FALSE(std::filesystem::exists(run_dir + "/tb"));
}

}  // namespace
}  // namespace gcrun::testing
