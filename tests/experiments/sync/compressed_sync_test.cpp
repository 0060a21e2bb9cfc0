#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "experiments/sync/replicas.h"
#include "experiments/sync/synchronizer.h"
#include "hyperparams/base/errors.h"
#include "tests/support/multi_rank.h"
#include "tests/support/reducer_fixtures.h"

// The strategies whose papers send a compressed payload, sparseloco and demo, with their codecs as
// reducers (two-bit-topk, dct-topk; the codecs by hand: tests/reducers/codec_reducers_test.cpp):
// two sparseloco syncs and two demo steps over two real Gloo ranks against float64
// re-computations of the papers' descriptions, both with the exact reducer, and the
// configurations their validate() refuses.

namespace gcrun::experiments {
namespace {

// --- the strategies over two ranks ---

ReducerOptions reducerOf(const std::string& name, SettingValues settings = {}) {
  ReducerOptions options;
  options.name = name;
  options.settings = std::move(settings);
  return options;
}

// One worker: a strategy built over `params` with the given sync settings and reducer.
struct Rig {
  Rig(comm::Communicator& comm, const std::string& strategy, SettingValues settings, std::vector<at::Tensor> initial,
      const ReducerOptions& reducer_options)
      : params(std::move(initial)),
        buffers(params),
        reducer(testing::buildReducer(reducer_options.name, comm, reducer_options)) {
    config.sync.strategy = strategy;
    config.sync.settings = std::move(settings);
    config.reducer = reducer_options;
    const bool lossless = reducers::reducerRegistry().at(reducer_options.name).factory.lossless;
    sync = synchronizerRegistry().at(strategy).factory.make(SyncContext{config, comm, *reducer, lossless, 0.0, params,
                                                                        names, buffers, [](size_t) {},
                                                                        testing::reducerMaker(comm, config)});
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
  return {{"every", int64_t{2}}, {"drift", false}, {"error_decay", 0.5}, {"outer_learning_rate", 0.8}};
}

ReducerOptions sparseLocoCodec() { return reducerOf("two-bit-topk", {{"chunk", int64_t{5}}, {"density", 0.4}}); }

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
    Rig rig(comm, "sparseloco", sparseLocoSettings(), initial, sparseLocoCodec());
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
      // weight: chunks of 5, 5, 2 keep 2, 2, 1; bias: one chunk of 3 keeps 2. Per tensor, its
      // levels (8 bytes a chunk), its positions in 3 bits each and its 2-bit codes, each rounded up
      // to bytes: weight 24 + 2 + 2, bias 8 + 1 + 1.
      EXPECT_EQ(rig.sync->afterStep(2 * s), 8u * (28 + 10));
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

// With the exact reducer all of e is sent: θ_g moves by the outer rate times the average
// pseudo-gradient (DiLoCo with a plain SGD outer step) and the accumulator is left zero.
TEST(SparseLoco, WithTheExactReducerSendsAllOfItsAccumulator) {
  testing::runRanks(2, [&](comm::Communicator& comm) {
    const auto initial = drawn({3, 4}, 1);
    Rig rig(comm, "sparseloco", sparseLocoSettings(),
            {initial.clone().requires_grad_(), drawn({3}, 2).requires_grad_()}, reducerOf("exact"));
    torch::NoGradGuard no_grad;
    rig.params[0].add_(localMove({3, 4}, comm.rank(), 1, 0).to(torch::kFloat32));
    rig.sync->afterStep(2);
    const auto average_move = (localMove({3, 4}, 0, 1, 0) + localMove({3, 4}, 1, 1, 0)) / 2;
    EXPECT_TRUE(
        torch::allclose(rig.params[0].to(torch::kFloat64), initial.to(torch::kFloat64) + 0.8 * average_move, 0, 1e-5));
    EXPECT_TRUE(torch::equal(rig.state().at("sparseloco/error/weight"), torch::zeros({3, 4})));
  });
}

// With sync.drift on, a sync reports how far the replicas were apart before it made them agree.
TEST(SparseLoco, MeasuresTheDriftBeforeItsSync) {
  testing::runRanks(2, [&](comm::Communicator& comm) {
    auto settings = sparseLocoSettings();
    settings["drift"] = true;
    Rig rig(comm, "sparseloco", settings, {drawn({3, 4}, 1).requires_grad_(), drawn({3}, 2).requires_grad_()},
            sparseLocoCodec());
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
  const SettingValues settings{{"momentum_decay", beta}};
  testing::runRanks(2, [&](comm::Communicator& comm) {
    Rig rig(
        comm, "demo", settings,
        {torch::zeros({4, 6}, torch::kFloat64).requires_grad_(), torch::zeros({6}, torch::kFloat64).requires_grad_()},
        reducerOf("dct-topk", {{"block", int64_t{4}}, {"topk", int64_t{5}}}));
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
      // int64 positions and float32 values: weight 2 blocks * 5, bias 2 blocks * 3.
      const uint64_t bits = rig.sync->afterBackward();
      EXPECT_EQ(bits, (2u * 5 + 2 * 3) * 96);
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
    // A strategy that accepts every configuration declares no validate().
    if (const auto& validate = synchronizerRegistry().at(strategy).factory.validate) validate(config);
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

// Their codecs are reducers now: any reducer carries what they send.
TEST(CompressedSync, ValidateAcceptsAnyReducer) {
  for (const std::string strategy : {"sparseloco", "demo"}) {
    for (const std::string reducer : {"powersgd", "two-bit-topk", "dct-topk", "qsgd"}) {
      EXPECT_EQ(refusal(strategy, [&](ExperimentConfig& c) { c.reducer.name = reducer; }), "") << strategy << reducer;
    }
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
    c.optimizer.name = "adamw";
    c.optimizer.momentum = 0.9;
    c.optimizer.momentum_type = MomentumType::nesterov;
    c.optimizer.wd_before_reduce = true;
    c.optimizer.clip_norm = 1;
  });
  EXPECT_EQ(message.rfind("sync.strategy=demo needs 5 settings changed: optimizer.name=sgd (got 'adamw': ", 0), 0u)
      << message;
  for (const std::string part : {"optimizer.name=sgd (got 'adamw': ", "optimizer.momentum=0 (got 0.9: ",
                                 "optimizer.momentum_type=heavy-ball (got 'nesterov': ",
                                 "optimizer.wd_before_reduce=false (got true: ", "optimizer.clip_norm=0 (got 1: "}) {
    EXPECT_NE(message.find(part), std::string::npos) << part << " in " << message;
  }
  EXPECT_NE(message.find("; add --set optimizer.name=sgd --set optimizer.momentum=0 --set "
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
