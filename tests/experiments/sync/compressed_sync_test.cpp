#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "experiments/sync/dct_blocks.h"
#include "experiments/sync/replicas.h"
#include "experiments/sync/synchronizer.h"
#include "experiments/sync/two_bit_topk.h"
#include "hyperparams/base/errors.h"
#include "tests/support/multi_rank.h"
#include "tests/support/reducer_fixtures.h"

// The strategies that send their own compressed payload: sparseloco's 2-bit top-k codec on a chunk
// worked out by hand, demo's DCT against its closed form, one sparseloco sync and one demo step
// over two real Gloo ranks against float64 re-computations of the papers' descriptions, and the
// configurations their validate() refuses.

namespace gcrun::experiments {
namespace {

// --- the 2-bit top-k codec ---

// Ten values in chunks of 8 at density 0.5: the first chunk keeps k = 4, the second (two
// elements) k = 1. Chunk 0's magnitudes by size: 6 (at 6), 4 (1), 3 (3), 2 (4); the two smallest
// kept, 3 and 2, form the lower level 2.5, the others the upper level 5. Chunk 1 is a tie, -7 and
// 7: the lower index is kept and both levels are 7.
const std::vector<double> kChunkValues = {0.5, -4, 1, 3, -2, 0.25, 6, -1, -7, 7};
const TwoBitTopKLayout kHandLayout{10, 8, 0.5};

TEST(TwoBitTopK, KeepsEachChunksLargestMagnitudesAtTwoLevels) {
  const auto payload = encodeTwoBitTopK(torch::tensor(kChunkValues, torch::kFloat64), kHandLayout);
  EXPECT_TRUE(torch::equal(payload.positions, torch::tensor({6, 1, 3, 4, 8}, torch::kInt)));
  // Codes (bit 0 negative, bit 1 upper): 6 -> 2, -4 -> 3, 3 -> 0, -2 -> 1, -7 -> 3; four to a byte
  // from the low bits: 2 + 3*4 + 0*16 + 1*64 = 78, then 3.
  EXPECT_TRUE(torch::equal(payload.codes, torch::tensor({78, 3}, torch::kByte)));
  EXPECT_TRUE(torch::equal(payload.levels, torch::tensor({2.5, 5.0, 7.0, 7.0}, torch::kFloat).view({2, 2})));
}

TEST(TwoBitTopK, DecodesToTheLevelsWithTheirSignsAndZeroElsewhere) {
  const auto payload = encodeTwoBitTopK(torch::tensor(kChunkValues, torch::kFloat64), kHandLayout);
  const std::vector<float> expected = {0, -5, 0, 2.5, -2.5, 0, 5, 0, -7, 0};
  EXPECT_TRUE(torch::equal(decodeTwoBitTopK(payload, kHandLayout), torch::tensor(expected)));
}

TEST(TwoBitTopK, CountsPositionsCodesAndLevelsAsTheyGoOnTheWire) {
  // 5 int32 positions, 5 codes in 2 bytes, 2 chunks of two float32 levels.
  EXPECT_EQ(twoBitTopKBits(kHandLayout), 5u * 32 + 2 * 8 + 2 * 64);
  const auto payload = encodeTwoBitTopK(torch::tensor(kChunkValues, torch::kFloat64), kHandLayout);
  EXPECT_EQ(twoBitTopKBits(kHandLayout),
            reducers::bitsOf(payload.positions) + reducers::bitsOf(payload.codes) + reducers::bitsOf(payload.levels));
}

TEST(TwoBitTopK, KeepsCeilOfDensityTimesTheChunkAndAtLeastOne) {
  EXPECT_EQ((TwoBitTopKLayout{100, 100, 0.07}.kept()), 7);  // not 8 from 0.07 * 100 = 7.000000000000001
  EXPECT_EQ((TwoBitTopKLayout{4096, 4096, 0.02}.kept()), 82);
  EXPECT_EQ((TwoBitTopKLayout{10, 4, 0.01}.kept()), 3);  // chunks of 4, 4, 2: one each
  EXPECT_EQ((TwoBitTopKLayout{10, 4, 0.01}.chunks()), 3);
}

// --- the DCT blocks ---

// The closed form of the orthonormal DCT-II coefficient (k, l) of an n x m block, in float64.
double dctCoefficient(const at::Tensor& block, int64_t k, int64_t l) {
  const auto n = block.size(0), m = block.size(1);
  const double s_k = std::sqrt((k == 0 ? 1.0 : 2.0) / n), s_l = std::sqrt((l == 0 ? 1.0 : 2.0) / m);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j) {
      sum += block[i][j].item<double>() * std::cos(M_PI * (2 * i + 1) * k / (2.0 * n)) *
             std::cos(M_PI * (2 * j + 1) * l / (2.0 * m));
    }
  }
  return s_k * s_l * sum;
}

TEST(DctBlocks, TheDctMatrixIsOrthogonal) {
  for (int64_t n : {1, 3, 8, 64}) {
    const auto c = dctMatrix(n, torch::kFloat64);
    EXPECT_TRUE(torch::allclose(c.mm(c.t()), torch::eye(n, torch::kFloat64), 0, 1e-12)) << n;
  }
}

TEST(DctBlocks, BlockSidesAreTheLargestDivisorsUpToTheLimit) {
  EXPECT_EQ(largestDivisorUpTo(6, 4), 3);
  EXPECT_EQ(largestDivisorUpTo(7, 4), 1);
  EXPECT_EQ(largestDivisorUpTo(128, 64), 64);
  EXPECT_EQ(largestDivisorUpTo(3, 64), 3);
}

TEST(DctBlocks, ABlocksCoefficientsAreTheClosedForm) {
  const auto x = torch::randn({3, 5}, at::detail::createCPUGenerator(7), torch::kFloat64);
  const auto coefficients = DctBlocks(x.sizes(), 64, torch::kFloat64).forward(x);
  ASSERT_EQ(coefficients.sizes(), (std::vector<int64_t>{1, 15}));
  for (int64_t k = 0; k < 3; ++k) {
    for (int64_t l = 0; l < 5; ++l)
      EXPECT_NEAR(coefficients[0][k * 5 + l].item<double>(), dctCoefficient(x, k, l), 1e-12);
  }
}

TEST(DctBlocks, BlocksTileTheMatrixRowMajorAndRoundTrip) {
  // (6, 2, 4) is a 6 x 8 matrix in blocks of 3 x 4: block 1 is rows 0-2, columns 4-7.
  const auto x = torch::randn({6, 2, 4}, at::detail::createCPUGenerator(8), torch::kFloat64);
  const DctBlocks dct(x.sizes(), 4, torch::kFloat64);
  EXPECT_EQ(dct.blocks(), 4);
  const auto coefficients = dct.forward(x);
  const auto block = x.reshape({6, 8}).narrow(0, 0, 3).narrow(1, 4, 4);
  EXPECT_NEAR(coefficients[1][1 * 4 + 2].item<double>(), dctCoefficient(block, 1, 2), 1e-12);
  EXPECT_TRUE(torch::allclose(dct.inverse(coefficients), x, 0, 1e-12));
}

TEST(DctBlocks, AVectorIsTransformedAlongItsOnlyRow) {
  const auto x = torch::randn({6}, at::detail::createCPUGenerator(9), torch::kFloat64);
  const DctBlocks dct(x.sizes(), 4, torch::kFloat64);
  const auto coefficients = dct.forward(x);
  ASSERT_EQ(coefficients.sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_NEAR(coefficients[1][2].item<double>(), dctCoefficient(x.narrow(0, 3, 3).view({1, 3}), 0, 2), 1e-12);
  EXPECT_TRUE(torch::allclose(dct.inverse(coefficients), x, 0, 1e-12));
}

// --- the strategies over two ranks ---

// One worker: a strategy built over `params` with the given sync settings and reducer exact.
struct Rig {
  Rig(comm::Communicator& comm, const std::string& strategy, SettingValues settings, std::vector<at::Tensor> initial)
      : params(std::move(initial)), buffers(params), reducer(testing::buildReducer("exact", comm)) {
    config.sync.strategy = strategy;
    config.sync.settings = std::move(settings);
    sync = synchronizerRegistry().at(strategy).factory.make(SyncContext{
        config, comm, *reducer, true, 0.0, params, names, buffers, [](size_t) {}, testing::reducerMaker(comm, config)});
  }
  TensorMap state() const {
    TensorMap saved;
    sync->saveState(saved);
    return saved;
  }

  ExperimentConfig config;
  std::vector<at::Tensor> params;
  std::vector<std::string> names{"weight", "bias"};
  GradientBuffers buffers;
  std::unique_ptr<reducers::Reducer> reducer;
  std::unique_ptr<Synchronizer> sync;
};

at::Tensor drawn(at::IntArrayRef shape, uint64_t seed, at::ScalarType dtype = torch::kFloat32) {
  return torch::randn(shape, at::detail::createCPUGenerator(seed), dtype);
}

// The published compressor re-computed in float64 on one flattened tensor: per chunk the k
// largest magnitudes, at the mean magnitude of their lower or upper half, with their signs.
at::Tensor twoBitTopKReference(const at::Tensor& e, int64_t chunk, double density) {
  auto out = torch::zeros({e.numel()}, torch::kFloat64);
  const auto flat = e.reshape({-1});
  for (int64_t start = 0; start < e.numel(); start += chunk) {
    const int64_t n = std::min(chunk, e.numel() - start);
    const int64_t k = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(density * n)));
    const auto values = flat.narrow(0, start, n);
    const auto order = std::get<1>(values.abs().sort(true, 0, true)).narrow(0, 0, k);
    const auto magnitudes = values.index_select(0, order).abs();
    const int64_t lower = k / 2;
    const double upper_level = magnitudes.narrow(0, 0, k - lower).mean().item<double>();
    const double lower_level = lower > 0 ? magnitudes.narrow(0, k - lower, lower).mean().item<double>() : upper_level;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t at = order[j].item<int64_t>();
      const double level = j < k - lower ? upper_level : lower_level;
      out[start + at] = values[at].item<double>() < 0 ? -level : level;
    }
  }
  return out.view(e.sizes());
}

SettingValues sparseLocoSettings() {
  return {{"every", int64_t{2}}, {"drift", false},     {"chunk", int64_t{5}},
          {"density", 0.4},      {"error_decay", 0.5}, {"outer_learning_rate", 0.8}};
}

// Worker w's model after the local steps before sync s: the global model moved by a draw of its own.
at::Tensor localMove(at::IntArrayRef shape, int worker, int sync, int which) {
  return drawn(shape, 100 * worker + 10 * sync + which, torch::kFloat64);
}

// Two syncs (after steps 2 and 4), so the second starts from the first's error feedback: each
// rank's model, its accumulator and the bits against the float64 re-computation of steps 1-6.
TEST(SparseLoco, TwoSyncsOverTwoRanksMatchTheAlgorithmInFloat64) {
  const std::vector<std::vector<int64_t>> shapes = {{3, 4}, {3}};
  const double beta = 0.5, outer_lr = 0.8;
  testing::runRanks(2, [&](comm::Communicator& comm) {
    std::vector<at::Tensor> global, initial;
    for (size_t i = 0; i < shapes.size(); ++i) {
      initial.push_back(drawn(shapes[i], 1 + i).requires_grad_());
      global.push_back(initial.back().detach().to(torch::kFloat64));
    }
    Rig rig(comm, "sparseloco", sparseLocoSettings(), initial);
    std::vector<std::vector<at::Tensor>> errors(
        2, {torch::zeros({3, 4}, torch::kFloat64), torch::zeros({3}, torch::kFloat64)});
    for (int s = 1; s <= 2; ++s) {
      std::vector<at::Tensor> average{torch::zeros({3, 4}, torch::kFloat64), torch::zeros({3}, torch::kFloat64)};
      for (int w = 0; w < 2; ++w) {
        for (size_t i = 0; i < shapes.size(); ++i) {
          // Δ = θ_g − θ_w, θ_w = θ_g + the worker's move.
          errors[w][i] = beta * errors[w][i] - localMove(shapes[i], w, s, i);
          const auto sent = twoBitTopKReference(errors[w][i], 5, 0.4);
          errors[w][i] -= sent;
          average[i] += sent / 2;
        }
      }
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < shapes.size(); ++i) {
        rig.params[i].add_(localMove(shapes[i], comm.rank(), s, i).to(torch::kFloat32));
        global[i] -= outer_lr * average[i];
      }
      EXPECT_EQ(rig.sync->afterStep(2 * s - 1), 0u);
      EXPECT_FALSE(rig.sync->lastSync());
      // weight: chunks of 5, 5, 2 keep 2, 2, 1; bias: one chunk of 3 keeps 2. Positions 7 * 32,
      // codes 2 + 1 bytes, levels 4 chunks * 64.
      EXPECT_EQ(rig.sync->afterStep(2 * s), 7u * 32 + 3 * 8 + 4 * 64);
      ASSERT_TRUE(rig.sync->lastSync());
      EXPECT_FALSE(rig.sync->lastSync()->replica_drift);
      const auto state = rig.state();
      for (size_t i = 0; i < shapes.size(); ++i) {
        EXPECT_TRUE(torch::allclose(rig.params[i].to(torch::kFloat64), global[i], 0, 1e-5)) << rig.names[i] << s;
        EXPECT_TRUE(torch::allclose(state.at("sparseloco/error/" + rig.names[i]).to(torch::kFloat64),
                                    errors[comm.rank()][i], 0, 1e-5))
            << rig.names[i] << s;
      }
      EXPECT_EQ(state.at("sparseloco/syncs").item<int64_t>(), s);
    }
  });
}

// With sync.drift on, a sync reports how far the replicas were apart before it made them agree.
TEST(SparseLoco, MeasuresTheDriftBeforeItsSync) {
  testing::runRanks(2, [&](comm::Communicator& comm) {
    auto settings = sparseLocoSettings();
    settings["drift"] = true;
    Rig rig(comm, "sparseloco", settings, {drawn({3, 4}, 1).requires_grad_(), drawn({3}, 2).requires_grad_()});
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < rig.params.size(); ++i) {
      rig.params[i].add_(localMove(rig.params[i].sizes(), comm.rank(), 1, i).to(torch::kFloat32));
    }
    const double before = replicaDrift(comm, rig.params);
    ASSERT_GT(before, 0.1);
    rig.sync->afterStep(2);
    ASSERT_TRUE(rig.sync->lastSync());
    ASSERT_TRUE(rig.sync->lastSync()->replica_drift);
    EXPECT_DOUBLE_EQ(*rig.sync->lastSync()->replica_drift, before);
    EXPECT_EQ(replicaDrift(comm, rig.params), 0.0) << "after the sync the replicas agree";
  });
}

// The published DCT-II block transform, from its closed-form matrix, in float64.
at::Tensor closedFormDct(int64_t n) {
  auto c = torch::zeros({n, n}, torch::kFloat64);
  for (int64_t k = 0; k < n; ++k) {
    for (int64_t j = 0; j < n; ++j) {
      c[k][j] = std::sqrt((k == 0 ? 1.0 : 2.0) / n) * std::cos(M_PI * (2 * j + 1) * k / (2.0 * n));
    }
  }
  return c;
}

// DeMo's step on one worker's momentum `delta` (a matrix cut into r x c blocks), in float64:
// δ ← β δ + g; per block the top-k DCT coefficients are sent and their inverse taken out of δ.
// Returns the dense decoded send.
at::Tensor demoSendReference(at::Tensor& delta, const at::Tensor& gradient, double beta, int64_t r, int64_t c,
                             int64_t k) {
  delta = beta * delta + gradient;
  const auto cr = closedFormDct(r), cc = closedFormDct(c);
  auto sent = torch::zeros_like(delta);
  for (int64_t i = 0; i < delta.size(0); i += r) {
    for (int64_t j = 0; j < delta.size(1); j += c) {
      const auto coefficients = cr.mm(delta.narrow(0, i, r).narrow(1, j, c)).mm(cc.t()).flatten();
      const auto top = std::get<1>(coefficients.abs().sort(true, 0, true)).narrow(0, 0, k);
      auto kept = torch::zeros_like(coefficients);
      kept.index_copy_(0, top, coefficients.index_select(0, top));
      sent.narrow(0, i, r).narrow(1, j, c).copy_(cr.t().mm(kept.view({r, c})).mm(cc));
    }
  }
  delta -= sent;
  return sent;
}

// Two steps over two ranks in float64: a 4 x 6 weight in 4 x 3 blocks keeping 5 coefficients of
// 12, a bias of 6 in two rows of 3 keeping all 3. The gradient buffers become the sign of the
// workers' average send; each rank's momentum is what it did not send.
TEST(Demo, TwoStepsOverTwoRanksMatchTheDescriptionInFloat64) {
  const double beta = 0.9;
  const SettingValues settings{{"momentum_decay", beta}, {"block", int64_t{4}}, {"topk", int64_t{5}}};
  testing::runRanks(2, [&](comm::Communicator& comm) {
    Rig rig(
        comm, "demo", settings,
        {torch::zeros({4, 6}, torch::kFloat64).requires_grad_(), torch::zeros({6}, torch::kFloat64).requires_grad_()});
    std::vector<std::vector<at::Tensor>> deltas(
        2, {torch::zeros({4, 6}, torch::kFloat64), torch::zeros({1, 6}, torch::kFloat64)});
    for (int step = 1; step <= 2; ++step) {
      auto gradient = [&](int w, size_t i) {
        return drawn(rig.params[i].sizes(), 1000 * w + 10 * step + i, torch::kFloat64);
      };
      std::vector<at::Tensor> average;
      for (size_t i = 0; i < 2; ++i) {
        const int64_t rows = i == 0 ? 4 : 1, cols = 3, k = i == 0 ? 5 : 3;
        at::Tensor sum = torch::zeros_like(deltas[0][i]);
        for (int w = 0; w < 2; ++w) {
          sum += demoSendReference(deltas[w][i], gradient(w, i).view(deltas[w][i].sizes()), beta, rows, cols, k);
        }
        average.push_back(sum / 2);
      }
      rig.sync->beforeBackward(true);
      for (size_t i = 0; i < 2; ++i) rig.buffers.gradients[i].copy_(gradient(comm.rank(), i));
      // Positions and float32 values: weight 2 blocks * 5, bias 2 blocks * 3.
      const uint64_t bits = rig.sync->afterBackward();
      EXPECT_EQ(bits, (2u * 5 + 2 * 3) * 64);
      EXPECT_EQ(rig.sync->afterStep(step), 0u);
      ASSERT_TRUE(rig.sync->lastSync());
      EXPECT_EQ(rig.sync->lastSync()->bits, bits);
      EXPECT_FALSE(rig.sync->lastSync()->replica_drift);
      const auto state = rig.state();
      for (size_t i = 0; i < 2; ++i) {
        EXPECT_TRUE(torch::equal(rig.buffers.gradients[i], average[i].sign().view(rig.params[i].sizes())))
            << rig.names[i] << step;
        EXPECT_TRUE(torch::allclose(state.at("demo/momentum/" + rig.names[i]),
                                    deltas[comm.rank()][i].view(rig.params[i].sizes()), 0, 1e-12))
            << rig.names[i] << step;
      }
      ASSERT_TRUE(rig.sync->sample());
      EXPECT_TRUE(rig.sync->sample()->error_feedback);
    }
  });
}

// --- what validate() refuses ---

std::string refusal(const std::string& strategy, const std::function<void(ExperimentConfig&)>& change) {
  ExperimentConfig config;
  config.sync.strategy = strategy;
  config.optimizer.momentum = 0;
  config.optimizer.momentum_type = MomentumType::heavy_ball;
  change(config);
  try {
    synchronizerRegistry().at(strategy).factory.validate(config);
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    return e.what();
  }
  return "";
}

TEST(CompressedSync, ValidateAcceptsTheExactReducerAndPlainSgd) {
  EXPECT_EQ(refusal("sparseloco", [](ExperimentConfig&) {}), "");
  EXPECT_EQ(refusal("demo", [](ExperimentConfig&) {}), "");
}

TEST(CompressedSync, ValidateRefusesAReducerNamingTheKey) {
  for (const std::string strategy : {"sparseloco", "demo"}) {
    const auto message = refusal(strategy, [](ExperimentConfig& c) { c.reducer.name = "powersgd"; });
    EXPECT_EQ(message.rfind("reducer.name: " + strategy, 0), 0u) << message;
    EXPECT_NE(message.find("(got 'powersgd')"), std::string::npos) << message;
  }
}

TEST(CompressedSync, DemoRefusesTheOptimizerSettingsThatChangeItsStep) {
  EXPECT_EQ(refusal("demo", [](ExperimentConfig& c) { c.optimizer.momentum = 0.9; }).rfind("optimizer.momentum: ", 0),
            0u);
  EXPECT_EQ(refusal("demo", [](ExperimentConfig& c) { c.optimizer.name = "adamw"; }).rfind("optimizer.name: ", 0), 0u);
  EXPECT_EQ(refusal("demo", [](ExperimentConfig& c) { c.optimizer.momentum_type = MomentumType::nesterov; })
                .rfind("optimizer.momentum_type: ", 0),
            0u);
  EXPECT_EQ(refusal("demo", [](ExperimentConfig& c) { c.optimizer.wd_before_reduce = true; })
                .rfind("optimizer.wd_before_reduce: ", 0),
            0u);
  EXPECT_EQ(refusal("demo", [](ExperimentConfig& c) { c.optimizer.clip_norm = 1; }).rfind("optimizer.clip_norm: ", 0),
            0u);
}

TEST(CompressedSync, DemoNamesEveryIncompatibleSettingInOneMessage) {
  const auto message = refusal("demo", [](ExperimentConfig& c) {
    c.reducer.name = "fp16";
    c.optimizer.name = "adamw";
    c.optimizer.momentum = 0.9;
    c.optimizer.momentum_type = MomentumType::nesterov;
    c.optimizer.wd_before_reduce = true;
    c.optimizer.clip_norm = 1;
  });
  EXPECT_EQ(message.rfind("sync.strategy=demo needs 6 settings changed: reducer.name=exact (got 'fp16': ", 0), 0u)
      << message;
  for (const std::string part : {"optimizer.name=sgd (got 'adamw': ", "optimizer.momentum=0 (got 0.9: ",
                                 "optimizer.momentum_type=heavy-ball (got 'nesterov': ",
                                 "optimizer.wd_before_reduce=false (got true: ", "optimizer.clip_norm=0 (got 1: "}) {
    EXPECT_NE(message.find(part), std::string::npos) << part << " in " << message;
  }
  EXPECT_NE(message.find("; add --set reducer.name=exact --set optimizer.name=sgd --set optimizer.momentum=0 --set "
                         "optimizer.momentum_type=heavy-ball --set optimizer.wd_before_reduce=false --set "
                         "optimizer.clip_norm=0 (as the run 'demo' of study gpt-sync has them)"),
            std::string::npos)
      << message;
}

TEST(CompressedSync, OneUnmetRequirementKeepsTheMessageOfItsKey) {
  EXPECT_EQ(refusal("demo", [](ExperimentConfig& c) { c.optimizer.wd_before_reduce = true; }),
            "optimizer.wd_before_reduce: demo applies the weight decay after its sign step, not into its momentum; "
            "set optimizer.wd_before_reduce=false (got true)");
}

}  // namespace
}  // namespace gcrun::experiments
