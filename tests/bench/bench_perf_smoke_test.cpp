// bench/run, the benchmark against PyTorch DDP, still runs: every local configuration it times
// (gcrun exact and PowerSGD, DDP's all-reduce and powerSGD_hook, the compute-only limit) for one
// step at batch 8, and its report with the ratios by round. Its timings mean nothing here: they are
// for a quiet machine (bench/RESULTS.md); what CI keeps is that its commands, the peer and the
// report still fit together.
#include <string>

#include <gtest/gtest.h>

#include "tests/support/command.h"

namespace gcrun {
namespace {

using testing::contains;
using testing::peerPythonHas;
using testing::runCommand;

TEST(BenchRun, EveryLocalConfigurationRunsAndTheReportHasItsRatiosByRound) {
  if (!peerPythonHas("torch.distributed.run"))
    GTEST_SKIP() << "Debian's python3-torch is missing: apt-get install python3-torch";
  const auto result = runCommand(std::string(GCRUN_BENCH_RUN) + " --quick --models resnet18 --skip-slow-link " +
                                 "--rounds 1 --no-write --gcrun " + GCRUN_BINARY_PATH);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_FALSE(contains(result.output, "FAILED")) << result.output;
  EXPECT_FALSE(contains(result.output, "failed")) << result.output;
  for (const char* row :
       {"| gcrun exact ", "| gcrun PowerSGD rank 2 ", "| DDP all-reduce ", "| DDP powerSGD_hook rank 2 ",
        "| compute-only limit: 2 independent workers ", "| DDP all-reduce / gcrun exact ",
        "| DDP powerSGD_hook / gcrun PowerSGD rank 2 ", "| gcrun PowerSGD rank 2 / compute-only limit "}) {
    EXPECT_TRUE(contains(result.output, row)) << row << "\n" << result.output;
  }
  EXPECT_TRUE(contains(result.output, "in every round: ")) << result.output;
}

}  // namespace
}  // namespace gcrun
