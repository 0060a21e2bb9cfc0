// The low-rank and sign compressors (unbiased-rank, svd, atomo, signum, sign-norm): each against a
// float64 reference or a closed form, with its exact message size.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <stdexcept>
#include <string>
#include <tuple>

#include "reducers/reducer.h"
#include "tests/support/compressor_fixtures.h"
#include "tests/support/multi_rank.h"
#include "tests/support/reducer_fixtures.h"

namespace gcrun::reducers {
namespace {

using testing::buildReducer;

using testing::runRanks;

// ---------------------------------------------------------------------------------------------
// unbiased-rank

TEST(UnbiasedRankReducer, AlternatesPAndQAndAveragesLocalApproximations) {
  const Shapes shapes = {{8, 5}, {4, 3, 3, 3}, {7}};
  for (int world_size : {1, 2, 3, 4}) {
    runRanks(world_size, [&](Communicator& comm) {
      const int64_t r = 2;
      ReducerOptions options;
      options.settings["rank"] = int64_t{r};
      auto reducer = buildReducer("unbiased-rank", comm, options);
      const uint64_t p_bits = 32 * (r * 8 + r * 4 + 7), q_bits = 32 * (r * 5 + r * 27 + 7);
      auto generator = at::detail::createCPUGenerator(42);
      std::vector<at::Tensor> qs;
      for (int64_t m : {5, 27}) {
        auto q = f64(torch::randn({m, r}, generator, torch::kFloat32));
        orthogonalize64(q);
        qs.push_back(q);
      }
      for (int step = 0; step < 4; ++step) {
        auto b = buffersFor(inputsOf(shapes, comm.rank(), step));
        EXPECT_EQ(reducer->reduce(b.send, b.out, b.memory), step % 2 == 0 ? p_bits : q_bits) << "step " << step;
        if (step > 0) continue;
        // First call: P = M_w Q with the shared orthonormal query; out = mean_w(M_w) Q Q^T.
        for (size_t i = 0; i < 2; ++i) {
          const auto projector = torch::matmul(qs[i], qs[i].t());
          const auto expected = torch::matmul(asMatrix(meanInput(shapes, world_size, i)), projector);
          expectClose(b.out[i], expected.view(shapes[i]), 1e-4, "P call output");
          const auto local = asMatrix(f64(b.send[i])) - torch::matmul(asMatrix(f64(b.send[i])), projector);
          expectClose(b.memory[i], local.view(shapes[i]), 1e-4, "local residual");
        }
        expectClose(b.out[2], meanInput(shapes, world_size, 2), 1e-6, "vector");
      }
    });
  }
}

// ---------------------------------------------------------------------------------------------
// svd

TEST(SvdReducer, AveragesEachWorkersBestApproximation) {
  const Shapes shapes = {{8, 5}, {4, 3, 3, 3}, {2, 9}, {7}};
  for (int world_size : {1, 2, 3, 4}) {
    runRanks(world_size, [&](Communicator& comm) {
      const int64_t r = 3;
      ReducerOptions options;
      options.settings["rank"] = int64_t{r};
      auto reducer = buildReducer("svd", comm, options);
      auto b = buffersFor(inputsOf(shapes, comm.rank()));
      // r * (n + m + 1) per matrix, at rank min(r, n, m); the vector whole.
      EXPECT_EQ(reducer->reduce(b.send, b.out, b.memory), 32u * (3 * 14 + 3 * 32 + 2 * 12 + 7));
      for (size_t i = 0; i < 3; ++i) {
        auto expected = torch::zeros(asMatrix(b.send[i]).sizes(), torch::kFloat64);
        for (int w = 0; w < world_size; ++w) expected += bestApproximation(asMatrix(inputsOf(shapes, w)[i]), r);
        expected /= world_size;
        expectClose(b.out[i], expected.view(shapes[i]), 1e-4, "tensor " + std::to_string(i));
        // [2, 9] at rank 2 is sent whole: its memory is rounding noise, measured against the input.
        const auto own = bestApproximation(asMatrix(b.send[i]), r).view(shapes[i]);
        EXPECT_LT((f64(b.memory[i]) - (f64(b.send[i]) - own)).norm().item<double>(),
                  1e-5 * f64(b.send[i]).norm().item<double>())
            << "memory " << i;
      }
      expectClose(b.out[3], meanInput(shapes, world_size, 3), 1e-6, "vector");
      EXPECT_EQ(b.memory[3].abs().max().item<float>(), 0.0f);
    });
  }
}

// ---------------------------------------------------------------------------------------------
// atomo

TEST(AtomoReducer, MessageHoldsRankAtomsPerTensorInTheReferenceShapes) {
  // rank 2: [] -> [1, 1], 1 atom: 3 floats; [7] -> [7, 1]: 9; [8] -> [4, 2]: 2 * 7; [5, 3]: 2 * 9;
  // [4, 3, 3, 3] -> [6, 18]: 2 * 25; [6, 4, 1, 1] -> [6, 4]: 2 * 11.
  const Shapes shapes = {{}, {7}, {8}, {5, 3}, {4, 3, 3, 3}, {6, 4, 1, 1}};
  for (int world_size : {1, 2, 3, 4}) {
    runRanks(world_size, [&](Communicator& comm) {
      ReducerOptions options;
      options.settings["rank"] = int64_t{2};
      auto reducer = buildReducer("atomo", comm, options);
      auto b = buffersFor(inputsOf(shapes, comm.rank()));
      EXPECT_EQ(reducer->reduce(b.send, b.out, b.memory), 32u * (3 + 9 + 14 + 18 + 50 + 22));
      // Tensors with at most one atom, or one of p = 1, are sent exactly.
      for (size_t i : {0, 1}) expectClose(b.out[i], meanInput(shapes, world_size, i), 1e-5, "exact atom");
    });
  }
}

// With equal singular values every atom has p = r / k, and conditioning the draws on exactly r
// atoms keeps that inclusion probability: the estimate is unbiased. 3 * an orthogonal 6x6 matrix,
// rank 2: per call E|X - M|^2 = sum (1/p - 1) s^2 = 108 against |M|^2 = 54, so the mean of N
// calls is off by about sqrt(2 / N) relatively; with 4 workers x 400 calls, 0.035. Tolerance 0.12.
TEST(AtomoReducer, IsUnbiasedInExpectationForEqualSingularValues) {
  const int world_size = 4, calls = 400;
  runRanks(world_size, [&](Communicator& comm) {
    ReducerOptions options;
    options.settings["rank"] = int64_t{2};
    auto reducer = buildReducer("atomo", comm, options);
    auto shared = at::detail::createCPUGenerator(9);
    const auto m = 3.0 * std::get<0>(torch::linalg_qr(torch::randn({6, 6}, shared, torch::kFloat64)));
    auto sum = torch::zeros({6, 6}, torch::kFloat64);
    at::Tensor first;
    for (int call = 0; call < calls; ++call) {
      auto b = buffersFor({m.to(torch::kFloat32)});
      reducer->reduce(b.send, b.out, b.memory);
      if (call == 0) first = b.out[0].clone();
      sum += f64(b.out[0]);
    }
    EXPECT_GT(relativeError(first, m), 0.3) << "one call is a coarse estimate";
    EXPECT_LT(relativeError(sum / calls, m), 0.12);
  });
}

TEST(AtomoReducer, SendsLowRankMatricesExactly) {
  runRanks(2, [&](Communicator& comm) {
    ReducerOptions options;
    options.settings["rank"] = int64_t{4};
    auto reducer = buildReducer("atomo", comm, options);
    auto own = at::detail::createCPUGenerator(50 + comm.rank());
    // Rank 1: the other singular values are rounding noise, below the numerical-rank tolerance.
    auto send = torch::matmul(torch::randn({6, 1}, own), torch::randn({1, 5}, own));
    auto b = buffersFor({send});
    reducer->reduce(b.send, b.out, b.memory);
    EXPECT_LT(b.memory[0].abs().max().item<float>(), 1e-5);
  });
}

TEST(AtomoReducer, GivesUpAfterAThousandDrawsWithoutExactlyRankAtoms) {
  runRanks(1, [&](Communicator& comm) {
    ReducerOptions options;
    options.settings["rank"] = int64_t{2};
    auto reducer = buildReducer("atomo", comm, options);
    // p = (1, 2e-6): the second atom is almost never drawn.
    auto b = buffersFor({torch::tensor({1e6f, 0.0f, 0.0f, 1.0f}).view({2, 2})});
    try {
      reducer->reduce(b.send, b.out, b.memory);
      FAIL() << "expected an error";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("no draw kept exactly 2 of the 2 singular values of a 2x2 gradient"),
                std::string::npos)
          << e.what();
    }
  });
}

TEST(AtomoReducer, RefusesErrorFeedback) { EXPECT_FALSE(reducerRegistry().at("atomo").factory.supports_memory); }

// ---------------------------------------------------------------------------------------------
// signum

TEST(SignumReducer, AppliesTheMajorityVoteOfTheSigns) {
  for (int world_size : {1, 2, 3, 4}) {
    runRanks(world_size, [&](Communicator& comm) {
      // Element j: the first j % (W + 1) workers vote +1 (with sizes that differ by worker), the
      // others -1; the vote is sign(2 * (j % (W + 1)) - W).
      const int64_t n = 45;
      auto j = torch::arange(n, torch::kFloat32);
      auto positive = torch::remainder(j, world_size + 1).gt(comm.rank());
      auto send = torch::where(positive, torch::full({n}, 0.5 * (comm.rank() + 1)), torch::full({n}, -3.0));
      auto b = buffersFor({send.view({5, 9})});
      ReducerOptions options;
      auto reducer = buildReducer("signum", comm, options);
      EXPECT_EQ(reducer->reduce(b.send, b.out, b.memory), 64u) << "45 bits padded to 64";
      auto expected = (2 * torch::remainder(j, world_size + 1) - world_size).sign().view({5, 9});
      EXPECT_TRUE(torch::equal(b.out[0], expected)) << b.out[0] << expected;
      EXPECT_TRUE(torch::allclose(b.memory[0], b.send[0] - b.out[0]));
    });
  }
}

TEST(SignumReducer, SendsZeroAsPlusOneAndPadsToWholeWords) {
  runRanks(1, [&](Communicator& comm) {
    auto reducer = buildReducer("signum", comm);
    auto b = buffersFor({torch::zeros({2, 3}), torch::tensor({-2.0f, 0.0f, 5.0f}), torch::zeros({32})});
    EXPECT_EQ(reducer->reduce(b.send, b.out, b.memory), 64u) << "41 bits padded to 64";
    EXPECT_TRUE(torch::equal(b.out[0], torch::ones({2, 3})));
    EXPECT_TRUE(torch::equal(b.out[1], torch::tensor({-1.0f, 1.0f, 1.0f})));
  });
  EXPECT_FALSE(reducerRegistry().at("signum").factory.supports_memory);
}

// ---------------------------------------------------------------------------------------------
// sign-norm

TEST(SignNormReducer, AveragesEachWorkersMeanMagnitudeTimesSigns) {
  const Shapes shapes = {{5, 3}, {7}, {4, 3, 2, 2}, {}};
  for (int world_size : {1, 2, 3, 4}) {
    runRanks(world_size, [&](Communicator& comm) {
      auto reducer = buildReducer("sign-norm", comm);
      auto b = buffersFor(inputsOf(shapes, comm.rank()));
      // 15 + 7 + 48 + 1 = 71 sign bits padded to 96, and one float32 scale per tensor.
      EXPECT_EQ(reducer->reduce(b.send, b.out, b.memory), 96u + 32u * 4);
      for (size_t i = 0; i < shapes.size(); ++i) {
        auto decoded = [&](const at::Tensor& g) {
          const auto sign = torch::where(g.lt(0), torch::full_like(g, -1.0), torch::ones_like(g));
          return f64(g).abs().mean() * f64(sign);
        };
        auto expected = torch::zeros(shapes[i], torch::kFloat64);
        for (int w = 0; w < world_size; ++w) expected += decoded(inputsOf(shapes, w)[i]);
        expectClose(b.out[i], expected / world_size, 1e-5, "tensor " + std::to_string(i));
        expectClose(b.memory[i], f64(b.send[i]) - decoded(b.send[i]), 1e-5, "memory " + std::to_string(i));
      }
    });
  }
}

}  // namespace
}  // namespace gcrun::reducers
