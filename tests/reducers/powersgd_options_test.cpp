// powersgd's options (power iterations, start_iter, min_compression_rate, epsilon) against float64.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "reducers/reducer.h"
#include "tests/support/compressor_fixtures.h"
#include "tests/support/multi_rank.h"
#include "tests/support/reducer_fixtures.h"

namespace gcrun::reducers {
namespace {

using testing::buildReducer;

using testing::runRanks;

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
            expectClose(b.out[i], expected, 1e-4,
                        "world " + std::to_string(world_size) + " step " + std::to_string(step) + " tensor " +
                            std::to_string(i));
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

}  // namespace
}  // namespace gcrun::reducers
