// The CUDA and NCCL paths: run on a machine with an NVIDIA GPU, and skip, saying why, on one
// without (CI, and scripts/check-libtorch2 --cuda, which compiles and links them against a CUDA
// LibTorch but has no device).
#include <gtest/gtest.h>

#include <chrono>

#include <torch/torch.h>

#include "reducers/comm/process_group.h"
#include "tests/support/command.h"
#include "tests/support/temp_dir.h"

namespace {

using gcrun::testing::contains;
using gcrun::testing::runCommand;
using gcrun::testing::TempDir;

#define SKIP_WITHOUT_A_GPU()                                                                             \
  if (!gcrun::comm::ncclAvailable()) GTEST_SKIP() << "this build has no NCCL (a LibTorch without CUDA)"; \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine"

TEST(Cuda, OneNcclWorkerSumsAndGathersOnItsGpu) {
  SKIP_WITHOUT_A_GPU();
  const auto comm = gcrun::comm::connect(gcrun::comm::WorldSpec{}, "nccl", std::chrono::seconds(60));
  EXPECT_EQ(comm->backend(), "nccl");
  auto tensor = torch::arange(6, torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCUDA));
  comm->allreduceSum(tensor);
  EXPECT_TRUE(torch::equal(tensor.cpu(), torch::arange(6, torch::kFloat32)));
  const auto gathered = comm->allgather(tensor);
  ASSERT_EQ(gathered.size(), 1u);
  EXPECT_TRUE(gathered.front().is_cuda());
  EXPECT_TRUE(torch::equal(gathered.front().cpu(), tensor.cpu()));
}

TEST(Cuda, TwoGlooWorkersAndOneNcclWorkerTrainOnTheGpu) {
  SKIP_WITHOUT_A_GPU();
  TempDir dir;
  const std::string quick =
      " --set device=cuda --set task.synthetic=true --set training.max_steps=3"
      " --set output.sinks=[jsonl] --set distributed.timeout_s=120";
  const auto gloo =
      runCommand(std::string(GCRUN_BINARY_PATH) + " experiment fashion-powersgd-rank2 --nproc-per-node 2" + quick +
                 " --set distributed.backend=gloo --output-dir " + dir.file("gloo"));
  EXPECT_EQ(gloo.exit_code, 0) << gloo.output;
  const auto nccl = runCommand(std::string(GCRUN_BINARY_PATH) + " experiment fashion-powersgd-rank2" + quick +
                               " --set distributed.backend=nccl --output-dir " + dir.file("nccl"));
  EXPECT_EQ(nccl.exit_code, 0) << nccl.output;
  EXPECT_TRUE(contains(gcrun::testing::readFile(dir.file("nccl/run.json")), "\"backend\": \"nccl\""));
}

}  // namespace
