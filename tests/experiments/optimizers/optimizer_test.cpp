// The optimizers apart from the trainer: their registry, AdamW and the clip against a closed form
// in float64, the cosine schedule against nanoGPT's formula, and their checkpoint state.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "experiments/optimizers/optimizer.h"
#include "tests/experiments/optimizers/optimizer_fixtures.h"
#include "tests/support/user_error.h"

namespace gcrun::experiments {
namespace {

using gcrun::testing::expectMessageHas;
using gcrun::testing::userErrorOf;
using testing::Model;

TEST(OptimizerRegistry, SgdIsTheDefaultAndEveryEntryIsComplete) {
  EXPECT_EQ(OptimizerOptions{}.name, "sgd");
  EXPECT_EQ(OptimizerOptions{}.schedule, "reference");
  EXPECT_TRUE(optimizerRegistry().contains("sgd"));
  EXPECT_TRUE(optimizerRegistry().contains("adamw"));
  for (const auto* entry : optimizerRegistry().entries()) {
    EXPECT_FALSE(entry->description.empty()) << entry->name;
    EXPECT_TRUE(entry->factory.validate && entry->factory.make) << entry->name;
  }
  EXPECT_TRUE(scheduleRegistry().contains("reference"));
  EXPECT_TRUE(scheduleRegistry().contains("cosine"));
}

TEST(OptimizerRegistry, UnknownNamesNameTheKeyAndTheKnownOnes) {
  OptimizerOptions options;
  options.name = "adam";
  expectMessageHas(userErrorOf([&] { checkedOptimizer(options); }),
                   {"optimizer.name", "unknown optimizer 'adam'", "adamw, sgd"});
  options.name = "adamw";
  options.schedule = "linear";
  expectMessageHas(userErrorOf([&] { checkedOptimizer(options); }),
                   {"optimizer.schedule", "'linear'", "cosine, reference"});
}

TEST(OptimizerRegistry, AdamWRefusesThePartsBeforeTheReduce) {
  for (const std::string key : {"optimizer.mom_before_reduce", "optimizer.wd_before_reduce"}) {
    OptimizerOptions options;
    (key == "optimizer.mom_before_reduce" ? options.mom_before_reduce : options.wd_before_reduce) = true;
    EXPECT_NO_THROW(checkedOptimizer(options)) << "sgd takes " << key;
    options.name = "adamw";
    expectMessageHas(userErrorOf([&] { checkedOptimizer(options); }), {key, "adamw", key + "=false"});
  }
}

// nanoGPT's get_lr, written out again.
double nanoGptRate(int64_t it, double lr, double min_lr, int64_t warmup, int64_t decay) {
  if (it < warmup) return lr * (it + 1) / (warmup + 1);
  if (it > decay) return min_lr;
  const double ratio = double(it - warmup) / double(decay - warmup);
  return min_lr + 0.5 * (1.0 + std::cos(3.14159265358979323846 * ratio)) * (lr - min_lr);
}

TEST(CosineSchedule, FollowsNanoGptAndDecaysOverTheRunWhenDecayStepsIsZero) {
  OptimizerOptions options;
  options.schedule = "cosine";
  options.warmup_steps = 3;
  options.decay_steps = 10;
  options.min_learning_rate = 0.01;
  const auto schedule = scheduleRegistry().at("cosine").factory(ScheduleContext{options, 16, 1000});
  for (int64_t it = 0; it < 14; ++it) {
    EXPECT_DOUBLE_EQ(schedule->rate(0.1, {it, 0.0}), nanoGptRate(it, 0.1, 0.01, 3, 10)) << it;
  }
  EXPECT_DOUBLE_EQ(schedule->rate(0.1, {0, 0.0}), 0.1 / 4);  // warm-up from the first step
  EXPECT_DOUBLE_EQ(schedule->rate(0.1, {3, 0.0}), 0.1);      // the peak, no world-size factor
  EXPECT_DOUBLE_EQ(schedule->rate(0.1, {10, 0.0}), 0.01);    // reached at decay_steps
  EXPECT_DOUBLE_EQ(schedule->rate(0.1, {6, 0.0}), 0.01 + 0.5 * (1 + std::cos(M_PI * 3 / 7)) * 0.09);
  options.decay_steps = 0;
  const auto over_run = scheduleRegistry().at("cosine").factory(ScheduleContext{options, 1, 23});
  EXPECT_DOUBLE_EQ(over_run->rate(0.1, {13, 0.0}), nanoGptRate(13, 0.1, 0.01, 3, 23));
  EXPECT_DOUBLE_EQ(over_run->rate(0.1, {23, 0.0}), 0.01);
  // Where nanoGPT would divide by zero (warm-up ending where the decay does): min_learning_rate.
  options.decay_steps = 3;
  const auto no_decay = scheduleRegistry().at("cosine").factory(ScheduleContext{options, 1, 23});
  EXPECT_DOUBLE_EQ(no_decay->rate(0.1, {2, 0.0}), 0.075);
  EXPECT_DOUBLE_EQ(no_decay->rate(0.1, {3, 0.0}), 0.01);
}

TEST(ReferenceSchedule, IsTheReferenceFormulaByEpoch) {
  OptimizerOptions options;
  options.decay_at_epochs = {150, 250};
  const auto schedule = scheduleRegistry().at("reference").factory(ScheduleContext{options, 16, 1000});
  for (double epoch : {0.0, 2.5, 5.0, 150.0, 299.0}) {
    EXPECT_EQ(schedule->rate(0.1, {7, epoch}), learningRate(options, 0.1, 16, epoch)) << epoch;
  }
}

// ---------------------------------------------------------------------------------------------
// AdamW in float64 against the formula, element by element: decayed matrix, undecayed bias and
// embedding, the global clip on some steps and not others, bias correction from step 1.

struct Closed {
  std::vector<std::vector<double>> p, m, v;
};

std::vector<std::vector<double>> gradientsAt(int t, const std::vector<size_t>& sizes) {
  std::vector<std::vector<double>> g;
  const double scale = t % 2 == 0 ? 3.0 : 0.05;  // clipped on even steps only
  for (size_t k = 0; k < sizes.size(); ++k) {
    g.emplace_back();
    for (size_t j = 0; j < sizes[k]; ++j) g.back().push_back(scale * std::sin(1.0 + 7.0 * k + 3.0 * j + 11.0 * t));
  }
  return g;
}

at::Tensor tensorOf(const std::vector<double>& values, at::IntArrayRef shape) {
  return at::tensor(values, at::kDouble).reshape(shape).clone();
}

class AdamWClosedForm : public ::testing::TestWithParam<bool> {};

TEST_P(AdamWClosedForm, StepsAsTheFormula) {
  const bool decay_embeddings = GetParam();
  OptimizerOptions options;
  options.name = "adamw";
  options.learning_rate = 0.02;
  options.beta1 = 0.8;
  options.beta2 = 0.9;
  options.epsilon = 1e-3;
  options.weight_decay = 0.5;
  options.clip_norm = 1.0;
  options.decay_embeddings = decay_embeddings;
  options.schedule = "cosine";
  options.warmup_steps = 1;
  options.decay_steps = 4;
  options.min_learning_rate = 0.002;
  const std::vector<std::vector<double>> init = {{0.5, -1.0, 2.0, 0.25}, {0.3, -0.7}, {1.5, -0.5, 0.75}};
  const std::vector<std::vector<int64_t>> shapes = {{2, 2}, {2}, {3, 1}};
  const std::vector<bool> decays = {true, false, decay_embeddings};
  const std::vector<size_t> sizes = {4, 2, 3};
  Model model;
  model.add("fc.weight", tensorOf(init[0], shapes[0]));
  model.add("fc.bias", tensorOf(init[1], shapes[1]));
  model.add("embedding.weight", tensorOf(init[2], shapes[2]));
  auto adamw = testing::makeOptimizer(options, model, {"embedding.weight"});

  Closed c{init, {}, {}};
  for (auto size : sizes) c.m.emplace_back(size, 0.0), c.v.emplace_back(size, 0.0);
  bool clipped = false, unclipped = false;
  for (int t = 1; t <= 6; ++t) {
    auto g = gradientsAt(t, sizes);
    std::vector<at::Tensor> grads;
    for (size_t k = 0; k < g.size(); ++k) grads.push_back(tensorOf(g[k], shapes[k]));
    testing::stepWith(*adamw, model, grads, t - 1);

    double squares = 0;
    for (const auto& gk : g) {
      for (double x : gk) squares += x * x;
    }
    const double coefficient = std::min(1.0 / (std::sqrt(squares) + 1e-6), 1.0);
    (coefficient < 1 ? clipped : unclipped) = true;
    const double lr = nanoGptRate(t - 1, 0.02, 0.002, 1, 4);
    for (size_t k = 0; k < sizes.size(); ++k) {
      for (size_t j = 0; j < sizes[k]; ++j) {
        const double gj = g[k][j] * coefficient;
        double& p = c.p[k][j];
        double& m = c.m[k][j];
        double& v = c.v[k][j];
        p -= lr * (decays[k] ? 0.5 : 0.0) * p;
        m = 0.8 * m + 0.2 * gj;
        v = 0.9 * v + 0.1 * gj * gj;
        const double m_hat = m / (1 - std::pow(0.8, t)), v_hat = v / (1 - std::pow(0.9, t));
        p -= lr * m_hat / (std::sqrt(v_hat) + 1e-3);
      }
    }
    for (size_t k = 0; k < sizes.size(); ++k) {
      const auto got = model.params[k].reshape({-1});
      for (size_t j = 0; j < sizes[k]; ++j) {
        EXPECT_NEAR(got[j].item<double>(), c.p[k][j], 1e-13)
            << "step " << t << ", " << model.names[k] << "[" << j << "]";
      }
    }
  }
  EXPECT_TRUE(clipped && unclipped) << "the case must clip some steps and not others";
}

INSTANTIATE_TEST_SUITE_P(Embeddings, AdamWClosedForm, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Decayed" : "Exempt"; });

// ---------------------------------------------------------------------------------------------
// Checkpoint state: saved after some steps and loaded into a new optimizer over a copy of the
// model, the rest of the steps are those of the uninterrupted run, bit for bit.

std::vector<at::Tensor> float32Gradients(int t) {
  return {at::sin(at::arange(6, at::kFloat).reshape({2, 3}) * (t + 1)) * (t % 2 ? 5.0 : 0.1),
          at::cos(at::arange(3, at::kFloat) + t)};
}

Model float32Model() {
  Model model;
  model.add("fc.weight", at::linspace(-1, 1, 6, at::kFloat).reshape({2, 3}));
  model.add("fc.bias", at::linspace(0.5, -0.5, 3, at::kFloat));
  return model;
}

void expectResumeIsExact(const OptimizerOptions& options, const std::vector<std::string>& entries) {
  Model straight = float32Model();
  auto uninterrupted = testing::makeOptimizer(options, straight);
  for (int t = 0; t < 5; ++t) testing::stepWith(*uninterrupted, straight, float32Gradients(t), t);

  Model first = float32Model();
  auto before = testing::makeOptimizer(options, first);
  for (int t = 0; t < 2; ++t) testing::stepWith(*before, first, float32Gradients(t), t);
  TensorMap saved;
  before->saveState(saved);
  TensorMap expected;
  before->expectState(expected);
  for (const auto& name : entries) {
    EXPECT_TRUE(saved.count(name) && expected.count(name)) << options.name << " saves " << name;
  }
  for (const auto& [name, tensor] : saved) EXPECT_TRUE(expected.count(name)) << name;
  Model second = first.clone();
  auto after = testing::makeOptimizer(options, second);
  saved["counter/step"] = at::scalar_tensor(int64_t{2}, at::kLong);  // the checkpoint's, which bounds its counts
  after->loadState(saved);
  for (int t = 2; t < 5; ++t) testing::stepWith(*after, second, float32Gradients(t), t);

  for (size_t i = 0; i < straight.params.size(); ++i) {
    EXPECT_TRUE(at::equal(straight.params[i], second.params[i])) << options.name << ": " << straight.names[i];
  }
  TensorMap end_straight, end_resumed;
  uninterrupted->saveState(end_straight);
  after->saveState(end_resumed);
  ASSERT_EQ(end_straight.size(), end_resumed.size());
  for (const auto& [name, tensor] : end_straight) {
    EXPECT_TRUE(at::equal(tensor, end_resumed.at(name))) << options.name << ": " << name;
  }
}

TEST(OptimizerState, AdamWResumesExactly) {
  OptimizerOptions options;
  options.name = "adamw";
  options.clip_norm = 1.0;
  options.schedule = "cosine";
  options.warmup_steps = 1;
  expectResumeIsExact(options, {"adamw/exp_avg/fc.weight", "adamw/exp_avg_sq/fc.bias", "adamw/step"});
  Model model = float32Model();
  auto adamw = testing::makeOptimizer(options, model);
  for (int t = 0; t < 3; ++t) testing::stepWith(*adamw, model, float32Gradients(t), t);
  TensorMap state;
  adamw->saveState(state);
  EXPECT_EQ(state.at("adamw/step").item<int64_t>(), 3);
  EXPECT_EQ(state.at("adamw/step").scalar_type(), at::kLong);
}

// SGD keeps the entry names of the checkpoints written before the optimizers were pluggable.
TEST(OptimizerState, SgdKeepsItsMomentumEntries) {
  OptimizerOptions options;
  options.warmup_epochs = 0;
  expectResumeIsExact(options, {"momentum/fc.weight", "momentum/fc.bias"});
  Model model = float32Model();
  auto sgd = testing::makeOptimizer(options, model);
  TensorMap state;
  sgd->saveState(state);
  EXPECT_TRUE(state.empty()) << "no momentum before the first step";
  EXPECT_TRUE(sgd->mayLack("momentum/fc.weight"));
  testing::stepWith(*sgd, model, float32Gradients(0), 0);
  sgd->saveState(state);
  EXPECT_EQ(state.size(), 2u);
}

// SGD with optimizer.clip_norm steps along the clipped reduced gradient; without it, as before.
TEST(OptimizerClip, SgdStepsAlongTheClippedGradient) {
  OptimizerOptions options;
  options.warmup_epochs = 0;
  options.scale_lr_with_factor = 1;
  options.weight_decay = 0;
  options.momentum = 0;
  options.momentum_type = MomentumType::heavy_ball;
  options.clip_norm = 2.0;
  Model model;
  model.add("w", at::tensor({1.0, 1.0}, at::kDouble));
  auto sgd = testing::makeOptimizer(options, model);
  testing::stepWith(*sgd, model, {at::tensor({30.0, 40.0}, at::kDouble)}, 0);  // norm 50: to norm 2
  const double coefficient = 2.0 / (50.0 + 1e-6);
  EXPECT_NEAR(model.params[0][0].item<double>(), 1.0 - 0.1 * 30.0 * coefficient, 1e-15);
  EXPECT_NEAR(model.params[0][1].item<double>(), 1.0 - 0.1 * 40.0 * coefficient, 1e-15);
  testing::stepWith(*sgd, model, {at::tensor({0.3, 0.4}, at::kDouble)}, 1);  // norm 0.5: left as it is
  EXPECT_NEAR(model.params[0][0].item<double>(), 1.0 - 0.1 * 30.0 * coefficient - 0.03, 1e-15);
}

TEST(OptimizerParts, SgdTimesItsPartsAndAdamWItsStep) {
  for (const auto& [name, expected] : std::vector<std::pair<std::string, std::vector<StepPart>>>{
           {"sgd", {StepPart::weight_decay, StepPart::momentum, StepPart::update}}, {"adamw", {StepPart::update}}}) {
    OptimizerOptions options;
    options.name = name;
    Model model = float32Model();
    auto optimizer = testing::makeOptimizer(options, model);
    std::vector<StepPart> parts;
    optimizer->step({0, 0.0}, [&](StepPart part, const std::function<void()>& work) {
      parts.push_back(part);
      work();
    });
    EXPECT_EQ(parts, expected) << name;
  }
}

}  // namespace
}  // namespace gcrun::experiments
