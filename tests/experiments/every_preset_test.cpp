// The trainer on the paper's terms: local clipping and a validation split, and every paper preset.
#include <cctype>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "experiments/setup/presets.h"
#include "experiments/setup/resolved_experiment.h"
#include "experiments/worker/runner.h"
#include "tasks/task.h"
#include "tests/support/multi_rank.h"
#include "tests/support/temp_dir.h"

namespace gcrun::tasks {
namespace {

using testing::TempDir;

// ---------------------------------------------------------------------------------------------
// The trainer's side of the contract: local clipping before the reduce, and a validation split.

// loss = |w|^2 / 2 from w = (3, 4): the gradient w has norm 5 and is clipped to 0.4. Validation
// reports the loss, test twice the loss, so the two cannot be mixed up.
class ClippedQuadraticTask : public Task {
 public:
  ClippedQuadraticTask() { weight_ = model_->register_parameter("weight", torch::tensor({3.0f, 4.0f})); }

  torch::nn::Module& model() override { return *model_; }
  int64_t batchesPerEpoch(const Shard&) const override { return 1; }
  std::unique_ptr<BatchStream> trainBatches(const Shard&, int64_t) override {
    struct Stream : BatchStream {
      bool done = false;
      std::optional<Batch> next() override {
        if (std::exchange(done, true)) return std::nullopt;
        return Batch{torch::zeros({1}), torch::zeros({1})};
      }
    };
    return std::make_unique<Stream>();
  }
  at::Tensor trainLoss(const Batch&, MetricSums& metrics) override {
    at::Tensor loss = 0.5 * weight_.pow(2).sum();
    metrics.add("loss", loss.item<double>());
    metrics.weight += 1;
    return loss;
  }
  MetricSums evaluate(const Shard&, const std::string& split, const EvaluationLimits&) override {
    MetricSums sums;
    sums.add("loss", (split == "test" ? 1.0 : 0.5) * weight_.pow(2).sum().item<double>());
    sums.weight = 1;
    return sums;
  }
  std::vector<std::string> evaluationSplits() const override { return {"validation", "test"}; }
  double localGradientClipNorm() const override { return 0.4; }
  bool synthetic() const override { return true; }

 private:
  std::shared_ptr<torch::nn::Module> model_ = std::make_shared<torch::nn::Module>();
  at::Tensor weight_;
};

TEST(PaperTrainer, ClipsTheLocalGradientAndReportsTheValidationSplit) {
  taskRegistry().add("clipped-quadratic", "|w|^2/2 with clipping (test)",
                     {[](const TaskContext&) { return std::make_unique<ClippedQuadraticTask>(); }});
  auto config = experiments::layeredConfig(
      "fashion-sgd", "",
      {"task.name=clipped-quadratic", "optimizer.learning_rate=0.1", "optimizer.warmup_epochs=0",
       "optimizer.scale_lr_with_factor=1", "optimizer.weight_decay=0", "optimizer.momentum=0",
       "optimizer.momentum_type=heavy-ball", "training.max_steps=1", "output.sinks=[csv, jsonl]"});
  TempDir dir;
  testing::runRanks(1, [&](comm::Communicator& comm) {
    auto result = experiments::runWorker(experiments::resolve(config), experiments::RunOptions{dir.file("run")}, comm);
    // torch.nn.utils.clip_grad_norm_: g = w * 0.4 / (5 + 1e-6); one step w -= 0.1 g.
    const double shrink = 1 - 0.1 * 0.4 / (5 + 1e-6);
    EXPECT_NEAR(result.training.last_validation.at("loss"), 12.5 * shrink * shrink, 1e-5);
    EXPECT_NEAR(result.training.last_test.at("loss"), 25 * shrink * shrink, 1e-5);
  });
  std::ifstream csv(dir.file("run/epochs.csv"));
  std::string header;
  std::getline(csv, header);
  EXPECT_NE(header.find("train_loss,validation_loss,test_loss"), std::string::npos) << header;
  std::stringstream events;
  events << std::ifstream(dir.file("run/metrics.jsonl")).rdbuf();
  EXPECT_NE(events.str().find("\"split\": \"validation\""), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Every preset: resolves, names registered components, and runs one step on synthetic data.

class EveryPreset : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryPreset, RunsOneSyntheticStep) {
  const std::string name = GetParam();
  std::vector<std::string> quick = {"task.synthetic=true",   "task.synthetic_samples=240", "training.max_steps=1",
                                    "training.batch_size=4", "task.test_batch_size=16",    "output.sinks=[jsonl]"};
  // The GPT's windows: 240 tokens hold 29 of 8 (24 per held-out split: 2), not one of 64.
  if (experiments::layeredConfig(name, "", quick).task.name == "language-model") quick.push_back("task.context=8");
  auto config = experiments::layeredConfig(name, "", quick);
  TempDir dir;
  testing::runRanks(1, [&](comm::Communicator& comm) {
    auto result = experiments::runWorker(experiments::resolve(config), experiments::RunOptions{dir.file("run")}, comm);
    EXPECT_EQ(result.training.steps, 1);
    const auto& evaluated =
        config.task.name == "wikitext2" ? result.training.last_validation : result.training.last_test;
    EXPECT_TRUE(evaluated.count("cross_entropy")) << name;
  });
  std::ifstream run_json(dir.file("run/run.json"));
  std::stringstream text;
  text << run_json.rdbuf();
  EXPECT_NE(text.str().find("\"synthetic_data\": true"), std::string::npos);
  if (!config.paper.metric.empty()) {
    EXPECT_NE(text.str().find("\"metric\": \"" + config.paper.metric + "\""), std::string::npos) << text.str();
    EXPECT_NE(text.str().find("\"run_value\""), std::string::npos) << text.str();
  }
}

std::vector<std::string> paperPresets() {
  std::vector<std::string> names;
  for (const auto& preset : experiments::listPresets()) {
    if (preset.name.rfind("fashion-", 0) != 0) names.push_back(preset.name);
  }
  return names;
}

INSTANTIATE_TEST_SUITE_P(Paper, EveryPreset, ::testing::ValuesIn(paperPresets()), [](const auto& info) {
  std::string name = info.param;
  for (auto& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
});

}  // namespace
}  // namespace gcrun::tasks
