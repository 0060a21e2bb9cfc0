// bench/perf, issue 46's table in one command, still runs: bench/run's every local configuration
// (gcrun exact and PowerSGD, DDP's all-reduce and powerSGD_hook, the compute-only limit) for one
// step at batch 8, the simulated workers' memory for two steps, and the one table. Its timings mean
// nothing here: they are for a quiet machine (bench/RESULTS.md); what CI keeps is that its commands,
// the peer and the report still fit together. The nanoGPT row needs a checkout of nanoGPT and the
// first build eight minutes: both say they were not run.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/command.h"
#include "tests/support/temp_dir.h"

namespace gcrun {
namespace {

using testing::contains;
using testing::peerPythonHas;
using testing::runCommand;

// Characters enough for two steps of 16 simulated workers (12 windows of 64 each) and an evaluation.
std::string writeText(const testing::TempDir& dir) {
  const std::string data = dir.file("data");
  std::filesystem::create_directories(data);
  const std::string sentence = "the quick brown fox jumps over the lazy dog. ";
  for (const auto& [name, repeats] : {std::pair{"train", 1500}, {"valid", 200}, {"test", 200}}) {
    std::ofstream out(data + "/wiki." + name + ".tokens");
    for (int i = 0; i < repeats; ++i) out << sentence;
  }
  return data;
}

TEST(BenchPerf, EveryPartRunsAndTheTableHasEachMeasure) {
  if (!peerPythonHas("torch.distributed.run"))
    GTEST_SKIP() << "Debian's python3-torch is missing: apt-get install python3-torch";
  testing::TempDir dir;
  const auto result = runCommand(std::string(GCRUN_BENCH_PERF) + " --quick --no-write --data " + writeText(dir) +
                                 " --gcrun " + GCRUN_BINARY_PATH);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_FALSE(contains(result.output, "FAILED")) << result.output;
  EXPECT_FALSE(contains(result.output, "| failed")) << result.output;
  for (const char* row :
       {"| gcrun exact ", "| gcrun PowerSGD rank 2 ", "| DDP all-reduce ", "| DDP powerSGD_hook rank 2 ",
        "| compute-only limit: 2 independent workers ", "| ResNet-18: DDP all-reduce / gcrun exact | >= 1.0 | ",
        "| ResNet-18: DDP powerSGD_hook / gcrun PowerSGD rank 2 | >= 1.0 | ",
        "| ResNet-18: gcrun PowerSGD rank 2 / compute-only limit | <= 1.05 | ",
        "| GPT: peak RSS of 16 simulated workers / one worker's | <= 2.0 | ",
        "| GPT: gcrun step / nanoGPT train.py step | <= 1.0 | not run: pass --nanogpt DIR | - |",
        "| first build of `gcrun`, empty compiler cache, s | <= 240 | not run: pass --first-build"}) {
    EXPECT_TRUE(contains(result.output, row)) << row << "\n" << result.output;
  }
}

}  // namespace
}  // namespace gcrun
