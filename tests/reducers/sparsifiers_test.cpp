#include <gtest/gtest.h>

#include <cmath>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "reducers/quantized_reducer.h"
#include "reducers/random_sparse_reducer.h"
#include "reducers/reducer.h"
#include "tests/support/bit_packing.h"
#include "tests/support/multi_rank.h"
#include "tests/support/reducer_fixtures.h"

// Sparsifiers, quantizers and casts: what each sends (bits), what it delivers, and what it keeps.
namespace gcrun::reducers {
namespace {

using testing::buildReducer;
using testing::clones;

using testing::runRanks;

struct Buffers {
  std::vector<at::Tensor> send, out, memory;
};

std::vector<std::vector<int64_t>> mixedShapes() { return {{}, {7}, {5, 3}, {4, 3, 3, 3}, {1, 1}, {6, 4}}; }

Buffers buffersFor(std::vector<at::Tensor> send) {
  Buffers b;
  for (const auto& t : send) {
    b.out.push_back(torch::full_like(t, 123.0));  // garbage the reducer must overwrite
    b.memory.push_back(torch::full_like(t, 456.0));
  }
  b.send = std::move(send);
  return b;
}

Buffers randomInputs(const std::vector<std::vector<int64_t>>& shapes, uint64_t seed) {
  auto generator = at::detail::createCPUGenerator(seed);
  std::vector<at::Tensor> send;
  for (const auto& shape : shapes) send.push_back(torch::randn(shape, generator, torch::kFloat32));
  return buffersFor(send);
}

at::Tensor sumOverRanks(Communicator& comm, const at::Tensor& t) {
  auto sum = t.clone();
  comm.allreduceSum(sum);
  return sum;
}

// ---------------------------------------------------------------------------------------------
// Bits: the formulas in each reducer's header, for every world size.

uint64_t elementsSent(double fraction, int64_t numel) {
  return std::max<int64_t>(1, static_cast<int64_t>(fraction * numel));
}

TEST(Sparsifiers, SendTheBitsOfTheirFormulas) {
  const double c = 0.1;
  std::vector<int64_t> numels;
  int64_t n = 0;
  for (const auto& shape : mixedShapes()) {
    numels.push_back(torch::empty(shape).numel());
    n += numels.back();
  }
  uint64_t topk = 0, random = 0;
  for (int64_t numel : numels) {
    topk += elementsSent(0.5 * c, numel);
    random += elementsSent(c, numel);
  }
  const uint64_t t = numels.size();
  auto packed = [&](uint64_t field_bits) { return 8 * (4 * t + (n * field_bits + 7) / 8); };
  const std::vector<std::pair<std::string, uint64_t>> expected = {
      {"topk", (32 + 32) * topk},                             // float32 values + int32 positions
      {"global-topk", (32 + 64) * elementsSent(0.5 * c, n)},  // float32 values + int64 positions
      {"random-k", 32 * random},
      {"random-block", 32 * random},
      {"qsgd", packed(10)},  // s = 256: 9 level bits + a sign bit
      {"terngrad", packed(2)},
      {"fp16", 16u * n},
      {"bf16", 16u * n},
  };
  for (int world_size : {1, 2, 3, 4}) {
    runRanks(world_size, [&](Communicator& comm) {
      for (const auto& [name, bits] : expected) {
        ReducerOptions options;
        options.settings["compression"] = double{c};
        auto reducer = buildReducer(name, comm, options);
        auto b = randomInputs(mixedShapes(), comm.rank());
        EXPECT_EQ(reducer->reduce(b.send, b.out, b.memory), bits) << name << " world " << world_size;
      }
    });
  }
}

TEST(Qsgd, SendsCeilLog2OfSPlusOneLevelBitsAndASignBitPerElement) {
  runRanks(2, [&](Communicator& comm) {
    // s -> bits per element: levels 0..s need ceil(log2(s + 1)) bits, plus the sign bit.
    const std::vector<std::pair<int64_t, uint64_t>> cases = {{1, 2}, {2, 3}, {3, 3}, {4, 4}, {255, 9}, {256, 10}};
    for (auto [levels, field_bits] : cases) {
      ReducerOptions options;
      options.settings["quantization_levels"] = int64_t{levels};
      auto reducer = buildReducer("qsgd", comm, options);
      auto b = randomInputs({{10, 3}}, 5);  // 30 elements, one norm
      EXPECT_EQ(reducer->reduce(b.send, b.out, b.memory), 8 * (4 + (30 * field_bits + 7) / 8)) << "s = " << levels;
    }
  });
}

TEST(BitPacking, PacksFieldsLeastSignificantBitFirstAndRoundTrips) {
  // codes 1, 2, 3 of 2 bits: stream bits 10 01 11 -> byte 0b00111001.
  auto packed = packBits(torch::tensor({1, 2, 3}, torch::kLong), 2);
  ASSERT_EQ(packed.numel(), 1);
  EXPECT_EQ(packed[0].item<uint8_t>(), 57);
  auto generator = at::detail::createCPUGenerator(3);
  for (int64_t bits : {1, 2, 3, 7, 8, 10, 17}) {
    auto codes = torch::randint(int64_t{1} << bits, {101}, generator, torch::kLong);
    auto bytes = packBits(codes, bits);
    EXPECT_EQ(bytes.numel(), (101 * bits + 7) / 8);
    EXPECT_TRUE(torch::equal(unpackBits(bytes, 101, bits), codes)) << bits << " bits";
  }
}

// ---------------------------------------------------------------------------------------------
// top-k

TEST(TopK, DeliversTheAverageOfEachWorkersLargestMagnitudes) {
  for (int world_size : {1, 2, 3}) {
    runRanks(world_size, [&](Communicator& comm) {
      // Rank r's magnitudes are 1..40 rotated by 10 r, signs alternating: its 5 largest
      // (k = 0.5 * 0.25 * 40) sit where (j + 10 r) % 40 >= 35.
      auto magnitude = [](int r, int j) { return static_cast<double>((j + 10 * r) % 40 + 1); };
      auto value = [&](int r, int j) { return (j % 2 ? -1.0 : 1.0) * magnitude(r, j); };
      std::vector<float> mine(40);
      for (int j = 0; j < 40; ++j) mine[j] = value(comm.rank(), j);
      auto b = buffersFor({torch::tensor(mine).view({4, 10})});
      ReducerOptions options;
      options.settings["compression"] = 0.25;
      auto reducer = buildReducer("topk", comm, options);
      EXPECT_EQ(reducer->reduce(b.send, b.out, b.memory), 64u * 5);

      auto expected_out = torch::zeros({40}, torch::kFloat64);
      auto expected_memory = torch::tensor(mine, torch::kFloat64);
      for (int r = 0; r < world_size; ++r) {
        for (int j = 0; j < 40; ++j) {
          if (magnitude(r, j) <= 35) continue;
          expected_out[j] += value(r, j) / world_size;
          if (r == comm.rank()) expected_memory[j] = 0.0;
        }
      }
      EXPECT_TRUE(torch::allclose(b.out[0].view({40}).to(torch::kFloat64), expected_out, 0, 1e-6));
      EXPECT_TRUE(torch::equal(b.memory[0].view({40}).to(torch::kFloat64), expected_memory));
    });
  }
}

TEST(TopK, SendsAtLeastOneElementOfEveryTensor) {
  runRanks(1, [&](Communicator& comm) {
    ReducerOptions options;
    options.settings["compression"] = 0.01;  // 0.5 * c * 7 < 1
    auto reducer = buildReducer("topk", comm, options);
    auto b = buffersFor({torch::tensor({0.1f, -3.0f, 0.2f, 0.0f, 1.0f, -0.5f, 2.0f})});
    EXPECT_EQ(reducer->reduce(b.send, b.out, b.memory), 64u);
    EXPECT_TRUE(torch::equal(b.out[0], torch::tensor({0.0f, -3.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f})));
    EXPECT_TRUE(torch::equal(b.memory[0], torch::tensor({0.1f, 0.0f, 0.2f, 0.0f, 1.0f, -0.5f, 2.0f})));
  });
}

TEST(GlobalTopK, SpendsTheBudgetOnTheLargestEntriesOfTheWholeGradient) {
  for (int world_size : {1, 2}) {
    runRanks(world_size, [&](Communicator& comm) {
      // small = 0.1..1.0, large = 10..19; k = 0.5 * 0.5 * 20 = 5: large's 15..19 and nothing of
      // small (per-tensor top-k would take 2 of each).
      auto small = torch::arange(1, 11, torch::kFloat32) * 0.1;
      auto large = torch::arange(10, 20, torch::kFloat32).view({2, 5});
      auto b = buffersFor({small.clone(), large.clone()});
      ReducerOptions options;
      options.settings["compression"] = 0.5;
      auto reducer = buildReducer("global-topk", comm, options);
      EXPECT_EQ(reducer->reduce(b.send, b.out, b.memory), 96u * 5);
      // Every worker sends the same gradient, so the average is its top 5.
      EXPECT_TRUE(torch::equal(b.out[0], torch::zeros({10})));
      EXPECT_TRUE(torch::equal(b.memory[0], small));
      auto kept = large.ge(15);
      EXPECT_TRUE(torch::allclose(b.out[1], large * kept));
      EXPECT_TRUE(torch::equal(b.memory[1], large * kept.logical_not()));
    });
  }
}

// ---------------------------------------------------------------------------------------------
// random-k, random-block

// Runs one step with an all-ones gradient and returns which entries this worker sent, as read
// back from its memory (the sent entries are the zeroed ones); checks that the output agrees.
at::Tensor sentMask(Reducer& reducer, int64_t numel) {
  auto b = buffersFor({torch::ones({numel})});
  reducer.reduce(b.send, b.out, b.memory);
  auto mask = b.memory[0].eq(0);
  EXPECT_TRUE(torch::equal(b.out[0], mask.to(torch::kFloat32))) << "average of ones where sent, else 0";
  return mask;
}

TEST(RandomSparse, EveryRankPicksTheSameFreshIndicesEachStep) {
  for (const std::string name : {"random-k", "random-block"}) {
    runRanks(3, [&](Communicator& comm) {
      ReducerOptions options;
      options.settings["compression"] = 0.1;
      auto reducer = buildReducer(name, comm, options);
      at::Tensor previous;
      for (int step = 0; step < 4; ++step) {
        auto mask = sentMask(*reducer, 97);
        EXPECT_EQ(mask.sum().item<int64_t>(), 9) << name;  // k = floor(0.1 * 97)
        for (const auto& other : comm.allgather(mask.to(torch::kUInt8))) {
          EXPECT_TRUE(torch::equal(other, mask.to(torch::kUInt8))) << name << " step " << step;
        }
        if (name == "random-block") {
          // One contiguous run modulo 97: exactly one entry sent whose predecessor was not.
          auto starts = mask.logical_and(mask.roll(1).logical_not());
          EXPECT_EQ(starts.sum().item<int64_t>(), 1) << "step " << step;
        }
        if (previous.defined()) {
          EXPECT_FALSE(torch::equal(mask, previous)) << name << " step " << step;
        }
        previous = mask;
      }
    });
  }
}

// random-k's sampler against the at::randperm it replaces: the same indices, and the generator
// where randperm leaves it (the next draws equal), from the smallest tensor to ResNet-18's largest.
TEST(RandomSparse, RandomKDrawsTheFirstIndicesOfRandperm) {
  for (auto [n, count] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {2, 1}, {2, 2}, {17, 17}, {1000, 1}, {1000, 999}, {4096, 40}, {2359296, 23592}}) {
    for (uint64_t seed : {1u, 7u}) {
      auto mine = at::detail::createCPUGenerator(seed);
      auto theirs = at::detail::createCPUGenerator(seed);
      const auto indices = firstOfRandomPermutation(n, count, mine);
      const auto expected = at::randperm(n, theirs, at::TensorOptions().dtype(at::kLong)).narrow(0, 0, count);
      EXPECT_TRUE(torch::equal(indices, expected)) << n << " " << count << " seed " << seed;
      EXPECT_TRUE(torch::equal(torch::rand({4}, mine), torch::rand({4}, theirs))) << n << " " << count;
    }
  }
}

TEST(RandomSparse, RescaledIsUnbiasedAndTheReferenceIsScaledByKOverN) {
  // n = 16, c = 0.25: k = 4, each element is sent with probability 1/4. Rescaled, an element
  // delivers 4 * mean with probability 1/4, else 0: variance 3 mean^2 per step, so the average of
  // T steps is within 5 standard deviations, 5 * sqrt(3 / T) |mean|, of the mean.
  constexpr int kSteps = 1000;
  for (const std::string name : {"random-k", "random-block"}) {
    for (bool rescale : {true, false}) {
      runRanks(2, [&](Communicator& comm) {
        ReducerOptions options;
        options.settings["compression"] = 0.25;
        options.settings["rescale"] = rescale;
        auto reducer = buildReducer(name, comm, options);
        auto g = torch::arange(1, 17, torch::kFloat64) * (comm.rank() + 1.0);
        auto mean = sumOverRanks(comm, g) / 2;
        auto total = torch::zeros({16}, torch::kFloat64);
        for (int step = 0; step < kSteps; ++step) {
          auto b = buffersFor({g.to(torch::kFloat32)});
          reducer->reduce(b.send, b.out, b.memory);
          // What this worker keeps: g where not sent; (1 - n/k) g = -3 g where sent, if rescaled.
          auto sent = b.out[0].ne(0);
          auto kept = at::where(sent, g * (rescale ? -3.0 : 0.0), g);
          EXPECT_TRUE(torch::allclose(b.memory[0].to(torch::kFloat64), kept, 1e-6, 1e-6));
          total += b.out[0].to(torch::kFloat64);
        }
        auto expected = rescale ? mean : mean * 0.25;
        auto tolerance = 5 * std::sqrt(3.0 / kSteps) * mean;
        EXPECT_TRUE(((total / kSteps - expected).abs() <= tolerance).all().item<bool>())
            << name << " rescale " << rescale << "\n"
            << total / kSteps - expected;
      });
    }
  }
}

// ---------------------------------------------------------------------------------------------
// qsgd, terngrad

// Runs `steps` reductions of the same gradient and returns the mean output.
at::Tensor meanOutput(Reducer& reducer, const at::Tensor& g, int steps) {
  auto total = torch::zeros(g.sizes(), torch::kFloat64);
  for (int step = 0; step < steps; ++step) {
    auto b = buffersFor({g.clone()});
    reducer.reduce(b.send, b.out, b.memory);
    total += b.out[0].to(torch::kFloat64);
  }
  return total / steps;
}

TEST(Qsgd, IsUnbiased) {
  // s = 2 levels, so rounding is coarse. Each element is norm/s times floor(y) or floor(y) + 1:
  // variance at most (norm / s)^2 / 4 per worker per step. Both ranks send g (independent
  // rounding), so T steps average within 5 * norm / (2 s sqrt(T)) of g.
  constexpr int kSteps = 1000;
  runRanks(2, [&](Communicator& comm) {
    ReducerOptions options;
    options.settings["quantization_levels"] = int64_t{2};
    auto reducer = buildReducer("qsgd", comm, options);
    auto g = torch::randn({32}, at::detail::createCPUGenerator(9), torch::kFloat32);
    const double norm = g.norm().item<double>();
    auto single = buffersFor({g.clone()});
    reducer->reduce(single.send, single.out, single.memory);
    EXPECT_GT((single.out[0] - g).abs().max().item<float>(), 0.05f) << "a step should be noisy";
    auto mean = meanOutput(*reducer, g, kSteps);
    const double tolerance = 5 * norm / (2 * 2 * std::sqrt(kSteps));
    EXPECT_LT((mean - g.to(torch::kFloat64)).abs().max().item<double>(), tolerance);
  });
}

TEST(Qsgd, DeliversLevelsOfTheNormAndKeepsTheRoundingAsMemory) {
  runRanks(1, [&](Communicator& comm) {
    ReducerOptions options;
    options.settings["quantization_levels"] = int64_t{4};
    auto reducer = buildReducer("qsgd", comm, options);
    auto b = randomInputs({{6, 5}, {3}}, 11);
    auto sent = clones(b.send);
    reducer->reduce(b.send, b.out, b.memory);
    for (size_t i = 0; i < sent.size(); ++i) {
      const double norm = sent[i].norm().item<double>();
      auto y = sent[i].abs().to(torch::kFloat64) * 4 / norm;  // exact level
      auto level = b.out[i].abs().to(torch::kFloat64) * 4 / norm;
      // The level is floor(y) or floor(y) + 1, an integer, with g's sign (or zero).
      EXPECT_LT((level - level.round()).abs().max().item<double>(), 1e-4);
      auto step = level.round() - y.floor();
      EXPECT_TRUE(step.eq(0).logical_or(step.eq(1)).all().item<bool>());
      EXPECT_TRUE((b.out[i] * sent[i]).ge(0).all().item<bool>());
      EXPECT_TRUE(torch::allclose(b.out[i] + b.memory[i], sent[i], 1e-5, 1e-6));
    }
  });
}

// The gpt-sync study's 4-bit QSGD (s = 15) on a tensor the size of its 64 x 64 matrices, against
// QSGD's closed form: element i is norm/s times floor(y_i) or floor(y_i) + 1, y_i = s |g_i| / norm,
// the second with probability p_i = frac(y_i), so E[Q(g)] = g and the noise it adds has
// E||Q(g) - g||^2 = (norm / s)^2 sum p_i (1 - p_i). Over T independent draws ||mean - g||^2 is
// then that over T (a term for any bias on top); both within a few percent for n = 4096.
TEST(Qsgd, FifteenLevelsMatchTheClosedFormMeanAndVariance) {
  constexpr int kSteps = 400;
  constexpr double kLevels = 15;
  runRanks(1, [&](Communicator& comm) {
    ReducerOptions options;
    options.settings["quantization_levels"] = int64_t{15};
    auto reducer = buildReducer("qsgd", comm, options);
    const auto g = torch::randn({64, 64}, at::detail::createCPUGenerator(21), torch::kFloat32);
    const auto g64 = g.to(torch::kFloat64);
    const double norm = g64.norm().item<double>();
    const auto p = g64.abs() * kLevels / norm - (g64.abs() * kLevels / norm).floor();
    const double variance = std::pow(norm / kLevels, 2) * (p * (1 - p)).sum().item<double>();
    auto total = torch::zeros_like(g64);
    double noise = 0;
    for (int step = 0; step < kSteps; ++step) {
      auto b = buffersFor({g.clone()});
      reducer->reduce(b.send, b.out, b.memory);
      total += b.out[0].to(torch::kFloat64);
      noise += (b.out[0].to(torch::kFloat64) - g64).pow(2).sum().item<double>();
    }
    EXPECT_NEAR(noise / kSteps / variance, 1.0, 0.02);
    const double mean_error = (total / kSteps - g64).pow(2).sum().item<double>();
    EXPECT_NEAR(mean_error * kSteps / variance, 1.0, 0.1);
    // At this size the noise outweighs the gradient: ||Q(g) - g|| is about 1.5 ||g||.
    EXPECT_GT(variance, 2 * norm * norm);
  });
}

TEST(TernGrad, IsUnbiasedAndTernary) {
  // Each element is scale * sign with probability |g| / scale: variance at most scale^2 / 4 per
  // worker per step, so T steps average within 5 * scale / (2 sqrt(T)) of g.
  constexpr int kSteps = 1000;
  runRanks(2, [&](Communicator& comm) {
    auto reducer = buildReducer("terngrad", comm);
    auto g = torch::randn({32}, at::detail::createCPUGenerator(13), torch::kFloat32);
    const double scale = g.abs().max().item<double>();
    auto mean = meanOutput(*reducer, g, kSteps);
    EXPECT_LT((mean - g.to(torch::kFloat64)).abs().max().item<double>(), 5 * scale / (2 * std::sqrt(kSteps)));
  });
  runRanks(1, [&](Communicator& comm) {
    auto reducer = buildReducer("terngrad", comm);
    auto g = torch::randn({6, 7}, at::detail::createCPUGenerator(17), torch::kFloat32);
    const float scale = g.abs().max().item<float>();
    auto b = buffersFor({g.clone()});
    reducer->reduce(b.send, b.out, b.memory);
    auto ternary = b.out[0] / scale;
    EXPECT_TRUE(ternary.eq(0).logical_or(ternary.eq(g.sign())).all().item<bool>());
    EXPECT_TRUE(torch::allclose(b.out[0] + b.memory[0], g));
    EXPECT_EQ(b.out[0].abs().max().item<float>(), scale) << "the largest element is always kept";
  });
}

// ---------------------------------------------------------------------------------------------
// fp16, bf16

TEST(LowPrecision, DividesBeforeTheCastSoLargeSumsDoNotOverflow) {
  runRanks(4, [&](Communicator& comm) {
    // 4 * 6e4 overflows fp16 (max 65504); 6e4 / 4 summed over 4 workers does not, and is exact.
    auto reducer = buildReducer("fp16", comm);
    auto b = buffersFor({torch::full({3}, 6e4f)});
    reducer->reduce(b.send, b.out, b.memory);
    EXPECT_TRUE(torch::equal(b.out[0], torch::full({3}, 6e4f)));
    EXPECT_TRUE(torch::equal(b.memory[0], torch::zeros({3})));
  });
}

// Between 2 workers fp16 all-gathers the float16 payloads and adds them itself: the bits of Gloo's
// float16 all-reduce of the same casts.
TEST(LowPrecision, Fp16BetweenTwoWorkersSumsAsGlooDoes) {
  runRanks(2, [&](Communicator& comm) {
    auto reducer = buildReducer("fp16", comm);
    auto g = torch::randn({1000}, at::detail::createCPUGenerator(comm.rank() + 7), torch::kFloat32) * 1e3;
    auto b = buffersFor({g.clone()});
    reducer->reduce(b.send, b.out, b.memory);
    auto expected = (g / 2).to(torch::kHalf);
    comm.allreduceSum(expected);
    EXPECT_TRUE(torch::equal(b.out[0], expected.to(torch::kFloat32)));
  });
}

TEST(LowPrecision, ErrorIsWithinTheCastsRoundingAndMemoryIsThisWorkersCastError) {
  for (auto [name, type, epsilon] : std::vector<std::tuple<std::string, at::ScalarType, double>>{
           {"fp16", torch::kHalf, std::pow(2.0, -11)}, {"bf16", torch::kBFloat16, std::pow(2.0, -8)}}) {
    for (int world_size : {1, 2, 3}) {
      runRanks(world_size, [&, name = name, type = type, epsilon = epsilon](Communicator& comm) {
        auto reducer = buildReducer(name, comm);
        auto g = torch::randn({50}, at::detail::createCPUGenerator(comm.rank()), torch::kFloat32);
        auto b = buffersFor({g.clone()});
        EXPECT_EQ(reducer->reduce(b.send, b.out, b.memory), 16u * 50);
        // Memory: g - W * cast(g / W), computed here in float64.
        auto delivered = (g / world_size).to(type).to(torch::kFloat64) * world_size;
        EXPECT_TRUE(torch::allclose(b.memory[0].to(torch::kFloat64), g.to(torch::kFloat64) - delivered, 0, 1e-6));
        // Output: one rounding per worker's cast and one per addition, each a relative epsilon
        // of a value at most the sum of the magnitudes.
        auto mean = sumOverRanks(comm, g.to(torch::kFloat64)) / world_size;
        auto bound = sumOverRanks(comm, g.abs().to(torch::kFloat64)) / world_size * (2 * world_size * epsilon);
        EXPECT_TRUE(((b.out[0].to(torch::kFloat64) - mean).abs() <= bound).all().item<bool>()) << name;
        EXPECT_GT((b.out[0].to(torch::kFloat64) - mean).abs().max().item<double>(), 0.0) << "rounding happened";
      });
    }
  }
}

}  // namespace
}  // namespace gcrun::reducers
