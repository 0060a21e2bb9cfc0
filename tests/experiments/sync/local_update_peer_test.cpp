// local-sgd and diloco against their PyTorch peers (local_update_peer.py, run by Debian's
// python3-torch 1.13, the library gcrun links): two workers over Gloo, the same model, data and
// SGD, every parameter of every rank after every step compared bit for bit. local-sgd's peer is
// PyTorch's own PostLocalSGDOptimizer + PeriodicModelAverager with DDP's post_localSGD_hook;
// diloco's is the published algorithm written out with torch.optim.SGD as inner and outer
// optimizer. Two workers make the exact reducer's sum-then-halve equal to PyTorch's
// halve-then-sum (halving is exact in floating point).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "experiments/sync/synchronizer.h"
#include "tests/support/command.h"
#include "tests/support/multi_rank.h"
#include "tests/support/reducer_fixtures.h"
#include "tests/support/temp_dir.h"

namespace gcrun::experiments {
namespace {

constexpr int kWorkers = 2;
constexpr int64_t kSteps = 14;
constexpr double kLearningRate = 0.05, kMomentum = 0.9;

struct PeerRun {
  std::string strategy;
  int64_t every = 3;
  int64_t warmup_steps = 0;
};

// The peer's data: small dyadic numbers from integers, exact in float32 on both sides.
at::Tensor dataOf(int rank, int64_t step) {
  const auto n = (torch::arange(48, torch::kInt64) * 7 + rank * 13 + step * 5).remainder(17) - 8;
  return (n.to(torch::kFloat32) / 8).reshape({8, 6});
}

// torch.optim.SGD(lr, momentum) with dampening 0, op for op: its buffer starts as the gradient.
class HeavyBallSgd {
 public:
  void step(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads) {
    if (buffers_.empty()) {
      for (const auto& g : grads) buffers_.push_back(g.clone());
    } else {
      for (size_t i = 0; i < grads.size(); ++i) buffers_[i].mul_(kMomentum).add_(grads[i]);
    }
    for (size_t i = 0; i < params.size(); ++i) params[i].detach().add_(buffers_[i], -kLearningRate);
  }

 private:
  std::vector<at::Tensor> buffers_;
};

// Each step's parameters (weight then bias, flattened), one row per step, of rank `rank`.
at::Tensor trainInGcrun(comm::Communicator& comm, const PeerRun& run) {
  std::vector<at::Tensor> params{torch::linspace(-1, 1, 24).reshape({6, 4}).clone().requires_grad_(),
                                 torch::zeros({4}).requires_grad_()};
  const std::vector<std::string> names{"weight", "bias"};
  GradientBuffers buffers(params);
  auto reducer = testing::buildReducer("exact", comm);
  ExperimentConfig config;
  config.sync.strategy = run.strategy;
  config.sync.settings["every"] = run.every;
  if (run.strategy == "local-sgd") config.sync.settings["warmup_steps"] = run.warmup_steps;
  auto sync = synchronizerRegistry()
                  .at(run.strategy)
                  .factory.make(SyncContext{config, comm, *reducer, true, 0.0, params, names, buffers, [](size_t) {},
                                            testing::reducerMaker(comm, config)});
  HeavyBallSgd sgd;
  std::vector<at::Tensor> rows;
  for (int64_t step = 1; step <= kSteps; ++step) {
    sync->beforeBackward(false);
    torch::mm(dataOf(comm.rank(), step), params[0]).add(params[1]).pow(2).mean().backward();
    torch::NoGradGuard no_grad;
    sync->afterBackward();
    sgd.step(params, buffers.gradients);
    sync->afterStep(step);
    rows.push_back(torch::cat({params[0].detach().reshape(-1), params[1].detach().reshape(-1)}));
  }
  return torch::stack(rows);
}

at::Tensor readFloats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto t = torch::empty({static_cast<int64_t>(bytes.size() / sizeof(float))}, torch::kFloat32);
  std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t.reshape({-1, 28});
}

void expectSameAsPeer(const PeerRun& run) {
  if (testing::runCommand("/usr/bin/python3 -c 'import torch.distributed.optim'").exit_code != 0) {
    GTEST_SKIP() << "Debian's python3-torch (with torch.distributed) is not installed: apt-get install python3-torch";
  }
  testing::TempDir dir;
  const std::string out = dir.file("peer");
  const auto peer = testing::runCommand("/usr/bin/python3 " GCRUN_LOCAL_UPDATE_PEER " " + run.strategy + " " +
                                        std::to_string(kSteps) + " " + std::to_string(run.every) + " " +
                                        std::to_string(run.warmup_steps) + " 0.05 0.9 0.7 0.9 " + out);
  ASSERT_EQ(peer.exit_code, 0) << peer.output;
  std::vector<at::Tensor> ours(kWorkers);
  testing::runRanks(kWorkers, [&](comm::Communicator& comm) { ours[comm.rank()] = trainInGcrun(comm, run); });
  for (int rank = 0; rank < kWorkers; ++rank) {
    const auto theirs = readFloats(out + ".rank" + std::to_string(rank));
    ASSERT_EQ(theirs.size(0), kSteps);
    for (int64_t step = 0; step < kSteps; ++step) {
      EXPECT_TRUE(torch::equal(ours[rank][step], theirs[step]))
          << run.strategy << ", rank " << rank << ", after step " << step + 1 << ": largest difference "
          << (ours[rank][step] - theirs[step]).abs().max().item<float>();
    }
  }
  // The workers disagree between syncs, or the test would not tell local steps from synced ones.
  bool differ = false;
  for (int64_t step = 0; step < kSteps; ++step) differ |= !torch::equal(ours[0][step], ours[1][step]);
  EXPECT_TRUE(differ);
}

// Warm-up of 4 every-step steps, then an average after steps 5, 8, 11 and 14.
TEST(LocalUpdatePeer, LocalSgdIsPyTorchsPostLocalSgd) { expectSameAsPeer({"local-sgd", 3, 4}); }

TEST(LocalUpdatePeer, LocalSgdWithoutWarmUpAveragesAfterTheFirstStep) { expectSameAsPeer({"local-sgd", 4, 0}); }

// Outer steps after steps 3, 6, 9 and 12: Nesterov momentum from its second step on.
TEST(LocalUpdatePeer, DilocoIsThePublishedAlgorithm) { expectSameAsPeer({"diloco", 3, 0}); }

}  // namespace
}  // namespace gcrun::experiments
