// The low-rank and sign compressors (powersgd's options, unbiased-rank, svd, atomo, signum,
// sign-norm): each against a float64 reference or a closed form, with its exact message size.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <stdexcept>
#include <string>
#include <tuple>

#include "reducers/reducer.h"
#include "tests/support/multi_rank.h"
#include "tests/support/reducer_fixtures.h"

namespace gcrun::reducers {
namespace {

using testing::buildReducer;

using testing::runRanks;
using Shapes = std::vector<std::vector<int64_t>>;

struct Buffers {
  std::vector<at::Tensor> send, out, memory;
};

// Worker `rank`'s inputs at `step`, reproducible on any thread, so that every rank can compute
// the float64 reference from all workers' inputs without communicating.
std::vector<at::Tensor> inputsOf(const Shapes& shapes, int rank, int step = 0) {
  auto generator = at::detail::createCPUGenerator(1000 * step + rank + 17);
  std::vector<at::Tensor> tensors;
  for (const auto& shape : shapes) tensors.push_back(torch::randn(shape, generator, torch::kFloat32));
  return tensors;
}

Buffers buffersFor(const std::vector<at::Tensor>& send) {
  Buffers b;
  for (const auto& t : send) {
    b.send.push_back(t.clone());
    b.out.push_back(torch::full_like(t, 123.0));
    b.memory.push_back(torch::full_like(t, 456.0));
  }
  return b;
}

at::Tensor f64(const at::Tensor& t) { return t.to(torch::kFloat64); }

// Tensor i averaged over all workers' inputs, in float64.
at::Tensor meanInput(const Shapes& shapes, int world_size, size_t i, int step = 0) {
  auto sum = torch::zeros(shapes[i], torch::kFloat64);
  for (int w = 0; w < world_size; ++w) sum += f64(inputsOf(shapes, w, step)[i]);
  return sum / world_size;
}

at::Tensor asMatrix(const at::Tensor& t) { return t.reshape({t.size(0), -1}); }

// The best rank-r approximation of a matrix, in float64.
at::Tensor bestApproximation(const at::Tensor& m, int64_t r) {
  at::Tensor u, s, vh;
  std::tie(u, s, vh) = torch::linalg_svd(f64(m), /*full_matrices=*/false);
  r = std::min(r, s.size(0));
  return torch::matmul(u.narrow(1, 0, r) * s.narrow(0, 0, r), vh.narrow(0, 0, r));
}

// Gram-Schmidt as the reference does it, in float64.
void orthogonalize64(at::Tensor& p, double eps = 1e-8) {
  for (int64_t i = 0; i < p.size(1); ++i) {
    auto col = p.narrow(1, i, 1);
    col.div_(col.pow(2).sum().sqrt() + eps);
    if (i + 1 < p.size(1)) {
      auto rest = p.narrow(1, i + 1, p.size(1) - i - 1);
      rest.sub_((col * rest).sum(0, true) * col);
    }
  }
}

double relativeError(const at::Tensor& actual, const at::Tensor& expected) {
  return (f64(actual) - f64(expected)).norm().item<double>() / std::max(f64(expected).norm().item<double>(), 1e-12);
}

void expectClose(const at::Tensor& actual, const at::Tensor& expected, double tolerance, const std::string& what) {
  EXPECT_LT(relativeError(actual, expected), tolerance) << what;
}

// ---------------------------------------------------------------------------------------------
// powersgd

// Three matrices of one shape (two of them as [6, 5] and one as a [6, 5, 1, 1] kernel), another
// shape, and a vector: the reducer batches the three, the float64 reference below does each alone.
Shapes batchedShapes() { return {{6, 5}, {4, 3, 2, 2}, {6, 5}, {7}, {6, 5, 1, 1}}; }

// The reference's RankKReducer matrix by matrix, in float64, over several steps with warm start.
TEST(PowerSgdOptions, BatchedSameShapeMatricesMatchTheFloat64PerMatrixReference) {
  for (int world_size : {1, 2, 3, 4}) {
    for (int64_t iterations : {0, 1}) {
      runRanks(world_size, [&](Communicator& comm) {
        const auto shapes = batchedShapes();
        const int64_t r = 2;
        ReducerOptions options;
        options.settings["rank"] = int64_t{r};
        options.settings["n_power_iterations"] = int64_t{iterations};
        auto reducer = buildReducer("powersgd", comm, options);

        auto generator = at::detail::createCPUGenerator(42);
        std::vector<at::Tensor> qs(shapes.size());
        for (size_t i = 0; i < shapes.size(); ++i) {
          if (shapes[i].size() < 2) continue;
          const int64_t m = asMatrix(torch::empty(shapes[i])).size(1);
          qs[i] = f64(torch::randn({m, r}, generator, torch::kFloat32));
        }
        for (int step = 0; step < 3; ++step) {
          auto b = buffersFor(inputsOf(shapes, comm.rank(), step));
          reducer->reduce(b.send, b.out, b.memory);
          for (size_t i = 0; i < shapes.size(); ++i) {
            const auto mean = meanInput(shapes, world_size, i, step);
            if (shapes[i].size() < 2) {
              expectClose(b.out[i], mean, 1e-5, "vector");
              continue;
            }
            at::Tensor p;
            for (int64_t round = 0; round <= iterations; ++round) {
              p = torch::matmul(asMatrix(mean), qs[i]) * world_size;  // the all-reduced sum
              orthogonalize64(p);
              qs[i] = torch::matmul(asMatrix(mean).t(), p);
            }
            const auto expected = torch::matmul(p, qs[i].t()).view(shapes[i]);
            expectClose(b.out[i], expected, 1e-4, "world " + std::to_string(world_size) + " step " +
                                                      std::to_string(step) + " tensor " + std::to_string(i));
            expectClose(b.memory[i], f64(b.send[i]) - expected, 1e-4, "memory of tensor " + std::to_string(i));
          }
        }
      });
    }
  }
}

// Inputs whose average has a clear spectrum, each worker's a small perturbation of it.
std::vector<at::Tensor> spectrumInputs(int rank) {
  auto shared = at::detail::createCPUGenerator(5);
  auto u = std::get<0>(torch::linalg_qr(torch::randn({12, 12}, shared, torch::kFloat64)));
  auto v = std::get<0>(torch::linalg_qr(torch::randn({10, 10}, shared, torch::kFloat64)));
  auto singular = torch::tensor({8.0, 5.0, 3.0, 2.0, 1.5, 1.0, 0.5, 0.3, 0.2, 0.1}, torch::kFloat64);
  auto base = torch::matmul(u.narrow(1, 0, 10) * singular, v.t());
  auto own = at::detail::createCPUGenerator(300 + rank);
  return {(base + 0.01 * torch::randn({12, 10}, own, torch::kFloat64)).to(torch::kFloat32)};
}

TEST(PowerSgdOptions, MorePowerIterationsApproachTheBestApproximationAndCostMore) {
  for (int world_size : {1, 2, 3, 4}) {
    runRanks(world_size, [&](Communicator& comm) {
      const int64_t r = 2;
      auto mean = torch::zeros({12, 10}, torch::kFloat64);
      for (int w = 0; w < world_size; ++w) mean += f64(spectrumInputs(w)[0]);
      const auto best = bestApproximation(mean / world_size, r);
      double previous = 1e9;
      for (int64_t iterations : {0, 1, 2, 4, 12}) {
        ReducerOptions options;
        options.settings["rank"] = int64_t{r};
        options.settings["reuse_query"] = false;
        options.settings["n_power_iterations"] = int64_t{iterations};
        auto reducer = buildReducer("powersgd", comm, options);
        auto b = buffersFor(spectrumInputs(comm.rank()));
        const uint64_t bits = reducer->reduce(b.send, b.out, b.memory);
        EXPECT_EQ(bits, static_cast<uint64_t>(32 * (iterations + 1) * r * (12 + 10))) << iterations;
        const double error = relativeError(b.out[0], best);
        EXPECT_LE(error, previous * 1.01 + 1e-6) << iterations << " iterations";
        previous = error;
        if (iterations == 0) {
          EXPECT_GT(error, 0.01);
        }
        if (iterations == 12) {
          EXPECT_LT(error, 1e-3);
        }
      }
    });
  }
}

TEST(PowerSgdOptions, StartIterAveragesExactlyBeforeCompressing) {
  const Shapes shapes = {{6, 5}, {7}, {4, 3, 2, 2}};
  for (int world_size : {1, 2, 3, 4}) {
    runRanks(world_size, [&](Communicator& comm) {
      ReducerOptions options;
      options.settings["rank"] = int64_t{2};
      options.settings["start_iter"] = int64_t{2};
      auto reducer = buildReducer("powersgd", comm, options);
      for (int step = 0; step < 3; ++step) {
        auto b = buffersFor(inputsOf(shapes, comm.rank(), step));
        const uint64_t bits = reducer->reduce(b.send, b.out, b.memory);
        if (step < 2) {
          EXPECT_EQ(bits, 32u * (30 + 7 + 48)) << "step " << step;
          for (size_t i = 0; i < shapes.size(); ++i) {
            expectClose(b.out[i], meanInput(shapes, world_size, i, step), 1e-6, "exact step");
            EXPECT_EQ(b.memory[i].abs().max().item<float>(), 0.0f);
          }
        } else {
          EXPECT_EQ(bits, 32u * (2 * (6 + 5) + 7 + 2 * (4 + 12))) << "compressed step";
          EXPECT_GT(b.memory[0].abs().max().item<float>(), 0.0f);
        }
      }
    });
  }
}

TEST(PowerSgdOptions, MinCompressionRateSendsSmallMatricesUncompressed) {
  // rank 2, rate 2: [5, 3] (15 <= 2 * 2 * 8) travels whole; [40, 30] (1200 > 2 * 2 * 70) is compressed.
  const Shapes shapes = {{5, 3}, {40, 30}, {7}};
  for (int world_size : {1, 2, 3, 4}) {
    runRanks(world_size, [&](Communicator& comm) {
      ReducerOptions options;
      options.settings["rank"] = int64_t{2};
      options.settings["min_compression_rate"] = 2.0;
      auto reducer = buildReducer("powersgd", comm, options);
      auto b = buffersFor(inputsOf(shapes, comm.rank()));
      EXPECT_EQ(reducer->reduce(b.send, b.out, b.memory), 32u * (15 + 7 + 2 * (40 + 30)));
      for (size_t i : {0, 2}) {
        expectClose(b.out[i], meanInput(shapes, world_size, i), 1e-6, "uncompressed");
        EXPECT_EQ(b.memory[i].abs().max().item<float>(), 0.0f);
      }
      expectClose(b.memory[1], b.send[1] - b.out[1], 1e-6, "compressed memory");
      EXPECT_GT(b.memory[1].abs().max().item<float>(), 0.0f);
    });
  }
}

TEST(PowerSgdOptions, OrthogonalizationEpsilonIsTheOneGiven) {
  runRanks(1, [&](Communicator& comm) {
    ReducerOptions options;
    options.settings["rank"] = int64_t{1};
    options.settings["orthogonalization_epsilon"] = 1.0;
    auto reducer = buildReducer("powersgd", comm, options);
    auto b = buffersFor({torch::ones({3, 4})});
    reducer->reduce(b.send, b.out, b.memory);
    // M = 1 1^T: P = M q is a multiple of 1, and the output is c * 1 1^T with c = |P|^2/(|P|+eps)^2.
    auto q = torch::randn({4, 1}, at::detail::createCPUGenerator(42), torch::kFloat32);
    const double p_norm = std::sqrt(3.0) * std::abs(q.sum().item<double>());
    const double c = p_norm * p_norm / ((p_norm + 1.0) * (p_norm + 1.0));
    expectClose(b.out[0], torch::full({3, 4}, c), 1e-5, "eps 1 shrinks the output");
  });
}

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
