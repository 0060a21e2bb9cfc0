// The powersgd reducer: exact on low-rank inputs, its memory, its message size and its warm start.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "reducers/reducer.h"
#include "tests/support/multi_rank.h"
#include "tests/support/reducer_fixtures.h"
#include "tests/support/reducer_inputs.h"

namespace gcrun::reducers {
namespace {

using testing::buildReducer;
using testing::clones;

using testing::runRanks;

// ---------------------------------------------------------------------------------------------
// powersgd

// Inputs of rank <= r that share a column space across workers: the average is rank <= r too.
Buffers lowRankInputs(int rank, int64_t r) {
  auto shared = at::detail::createCPUGenerator(7);  // the shared column space
  auto basis_matrix = randn({8, r}, shared);
  auto basis_conv = randn({6, r}, shared);
  auto own = at::detail::createCPUGenerator(100 + rank);
  Buffers b;
  b.send = {torch::matmul(basis_matrix, randn({r, 5}, own)),
            torch::matmul(basis_conv, randn({r, 3 * 2 * 2}, own)).view({6, 3, 2, 2}), randn({6}, own)};
  for (const auto& t : b.send) {
    b.out.push_back(torch::empty_like(t));
    b.memory.push_back(torch::empty_like(t));
  }
  return b;
}

TEST(PowerSgdReducer, ReconstructsLowRankInputsExactly) {
  for (int world_size : {1, 2, 3, 4}) {
    runRanks(world_size, [&](Communicator& comm) {
      ReducerOptions options;
      options.settings["rank"] = int64_t{2};
      auto reducer = buildReducer("powersgd", comm, options);
      auto b = lowRankInputs(comm.rank(), 2);
      auto sent = clones(b.send);
      reducer->reduce(b.send, b.out, b.memory);
      for (size_t i = 0; i < sent.size(); ++i) {
        auto mean = meanOverRanks(comm, sent[i]);
        EXPECT_TRUE(torch::allclose(b.out[i], mean, 1e-4, 1e-4))
            << "tensor " << i << " max error " << (b.out[i] - mean).abs().max().item<float>();
      }
    });
  }
}

TEST(PowerSgdReducer, MemoryIsInputMinusTheAveragedApproximation) {
  runRanks(3, [&](Communicator& comm) {
    ReducerOptions options;
    options.settings["rank"] = int64_t{1};
    auto reducer = buildReducer("powersgd", comm, options);
    auto b = makeInputs(mixedShapes(), comm.rank());
    auto sent = clones(b.send);
    reducer->reduce(b.send, b.out, b.memory);
    for (size_t i = 0; i < sent.size(); ++i) {
      if (sent[i].dim() <= 1) {
        EXPECT_EQ(b.memory[i].abs().sum().item<float>(), 0.0f) << "vectors travel uncompressed";
      } else {
        EXPECT_TRUE(torch::allclose(b.out[i] + b.memory[i], sent[i], 1e-5, 1e-6)) << "tensor " << i;
      }
    }
  });
}

TEST(PowerSgdReducer, SendsPAndQOfEachMatrixAndEveryVectorElement) {
  for (int64_t r : {1, 2, 4, 7}) {
    runRanks(2, [&](Communicator& comm) {
      ReducerOptions options;
      options.settings["rank"] = int64_t{r};
      auto reducer = buildReducer("powersgd", comm, options);
      auto b = makeInputs(mixedShapes(), comm.rank());
      uint64_t floats = 0;
      std::vector<Reducer::TensorCost> expected;
      for (const auto& t : b.send) {
        if (t.dim() <= 1) {
          floats += t.numel();
          expected.push_back({32 * static_cast<uint64_t>(t.numel()), 0});
        } else {
          const int64_t n = t.size(0), m = t.numel() / n;
          floats += std::min({n, m, r}) * (n + m);
          expected.push_back({32 * static_cast<uint64_t>(std::min({n, m, r}) * (n + m)), std::min({n, m, r})});
        }
      }
      EXPECT_EQ(reducer->reduce(b.send, b.out, b.memory), 32 * floats) << "rank " << r;
      // layers.csv's bits and rank, tensor by tensor.
      const auto costs = reducer->lastCosts();
      ASSERT_EQ(costs.size(), expected.size());
      for (size_t i = 0; i < costs.size(); ++i) {
        EXPECT_EQ(costs[i].bits, expected[i].bits) << "rank " << r << " tensor " << i;
        EXPECT_EQ(costs[i].rank, expected[i].rank) << "rank " << r << " tensor " << i;
      }
    });
  }
}

// With warm start, repeated steps on the same matrix are subspace iteration: the output converges
// to the best rank-r approximation, which a float64 SVD gives in closed form.
TEST(PowerSgdReducer, WarmStartConvergesToTheBestRankRApproximation) {
  runRanks(1, [&](Communicator& comm) {
    ReducerOptions options;
    options.settings["rank"] = int64_t{2};
    auto reducer = buildReducer("powersgd", comm, options);
    torch::manual_seed(3);
    auto u = torch::linalg_qr(torch::randn({12, 12}, torch::kFloat64));
    auto v = torch::linalg_qr(torch::randn({9, 9}, torch::kFloat64));
    auto singular = torch::tensor({10.0, 6.0, 1.0, 0.5, 0.2, 0.1, 0.05, 0.01, 0.0}, torch::kFloat64);
    auto m64 = torch::matmul(std::get<0>(u).narrow(1, 0, 9) * singular, std::get<0>(v).t());
    auto best =
        torch::matmul(std::get<0>(u).narrow(1, 0, 2) * singular.narrow(0, 0, 2), std::get<0>(v).narrow(1, 0, 2).t());
    std::vector<at::Tensor> out{torch::empty({12, 9})}, memory{torch::empty({12, 9})};
    double first_error = 0, last_error = 0;
    for (int step = 0; step < 30; ++step) {
      std::vector<at::Tensor> send{m64.to(torch::kFloat32)};
      reducer->reduce(send, out, memory);
      last_error = (out[0].to(torch::kFloat64) - best).norm().item<double>();
      if (step == 0) first_error = last_error;
    }
    EXPECT_GT(first_error, 0.1);
    EXPECT_LT(last_error, 1e-4);
  });
}

TEST(PowerSgdReducer, WithoutWarmStartDrawsAFreshQueryEachStep) {
  runRanks(1, [&](Communicator& comm) {
    ReducerOptions options;
    options.settings["rank"] = int64_t{1};
    options.settings["reuse_query"] = false;
    auto reducer = buildReducer("powersgd", comm, options);
    torch::manual_seed(5);
    auto m = torch::randn({10, 8});
    std::vector<at::Tensor> first{torch::empty({10, 8})}, second{torch::empty({10, 8})};
    std::vector<at::Tensor> memory{torch::empty({10, 8})};
    reducer->reduce({m.clone()}, first, memory);
    reducer->reduce({m.clone()}, second, memory);
    EXPECT_FALSE(torch::allclose(first[0], second[0]));
  });
}

}  // namespace
}  // namespace gcrun::reducers
