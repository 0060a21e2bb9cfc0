// The optimizer against the reference on a closed-form task, and real training across ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include "experiments/setup/resolved_experiment.h"
#include "experiments/worker/runner.h"
#include "tasks/task.h"
#include "tests/support/multi_rank.h"
#include "tests/support/temp_dir.h"

namespace gcrun::experiments {
namespace {

using testing::runRanks;
using testing::TempDir;

// ---------------------------------------------------------------------------------------------
// The optimizer, on a task whose gradient is known in closed form: loss = |w|^2 / 2, so g = w.

class QuadraticModel : public torch::nn::Module {
 public:
  QuadraticModel() { weight = register_parameter("weight", torch::tensor({1.0f, -2.0f, 3.0f})); }
  at::Tensor weight;
};

class QuadraticTask : public tasks::Task {
 public:
  static constexpr int64_t kBatchesPerEpoch = 4;

  torch::nn::Module& model() override { return *model_; }
  int64_t batchesPerEpoch(const tasks::Shard&) const override { return kBatchesPerEpoch; }

  std::unique_ptr<tasks::BatchStream> trainBatches(const tasks::Shard&, int64_t) override {
    struct Stream : tasks::BatchStream {
      int64_t left = kBatchesPerEpoch;
      std::optional<tasks::Batch> next() override {
        if (left-- <= 0) return std::nullopt;
        return tasks::Batch{torch::zeros({1}), torch::zeros({1})};
      }
    };
    return std::make_unique<Stream>();
  }

  at::Tensor trainLoss(const tasks::Batch&, tasks::MetricSums& metrics) override {
    auto loss = 0.5 * model_->weight.pow(2).sum();
    metrics.add("loss", loss.item<double>());
    metrics.weight += 1;
    return loss;
  }

  tasks::MetricSums evaluate(const tasks::Shard&, const std::string&, const tasks::EvaluationLimits&) override {
    tasks::MetricSums sums;
    sums.add("loss", 0.5 * model_->weight.pow(2).sum().item<double>());
    sums.weight = 1;
    return sums;
  }

  bool synthetic() const override { return true; }

 private:
  std::shared_ptr<QuadraticModel> model_ = std::make_shared<QuadraticModel>();
};

void registerQuadraticTask() {
  tasks::taskRegistry().add("quadratic", "loss |w|^2/2 (test)",
                            {[](const tasks::TaskContext&) { return std::make_unique<QuadraticTask>(); }});
}

// The quadratic task, counting how often it is built and asked for its batches per epoch.
struct BuildCounts {
  std::mutex mutex;
  int built = 0;
  int batches_asked = 0;
};

class CountedQuadraticTask : public QuadraticTask {
 public:
  explicit CountedQuadraticTask(BuildCounts& counts) : counts_(counts) {
    const std::lock_guard<std::mutex> lock(counts_.mutex);
    ++counts_.built;
  }
  int64_t batchesPerEpoch(const tasks::Shard& shard) const override {
    const std::lock_guard<std::mutex> lock(counts_.mutex);
    ++counts_.batches_asked;
    return QuadraticTask::batchesPerEpoch(shard);
  }

 private:
  BuildCounts& counts_;
};

ExperimentConfig quadraticConfig(const std::vector<std::string>& assignments) {
  registerQuadraticTask();
  std::vector<std::string> all = {"task.name=quadratic",       "optimizer.learning_rate=0.1",
                                  "optimizer.warmup_epochs=0", "optimizer.scale_lr_with_factor=1",
                                  "optimizer.weight_decay=0",  "output.sinks=[jsonl]"};
  all.insert(all.end(), assignments.begin(), assignments.end());
  return layeredConfig("fashion-sgd", "", all);
}

// A finite loss whose gradient is NaN: where() passes the unselected branch's NaN to the gradient.
class NanGradientTask : public QuadraticTask {
 public:
  at::Tensor trainLoss(const tasks::Batch&, tasks::MetricSums& metrics) override {
    auto& w = dynamic_cast<QuadraticModel&>(model()).weight;
    auto loss = torch::where(w > 100, w * std::nan(""), 0.5 * w * w).sum();
    metrics.add("loss", loss.item<double>());
    metrics.weight += 1;
    return loss;
  }
};

TEST(Training, ANanGradientStopsTheRunNamingStepAndParameter) {
  tasks::taskRegistry().add("nan-gradient", "finite loss, NaN gradient (test)",
                            {[](const tasks::TaskContext&) { return std::make_unique<NanGradientTask>(); }});
  auto config = quadraticConfig({"task.name=nan-gradient", "reducer.name=signum", "optimizer.memory=false"});
  TempDir dir;
  runRanks(1, [&](comm::Communicator& comm) {
    try {
      runWorker(resolve(config), RunOptions{dir.file("run")}, comm);
      ADD_FAILURE() << "a NaN gradient must stop the run";
    } catch (const std::exception& e) {
      const std::string message = e.what();
      // signum would turn the NaN into a sign; the local check catches it first.
      EXPECT_NE(message.find("step 1: the local gradient of 'weight' is not finite"), std::string::npos) << message;
    }
  });
}

// The final weights after `steps` steps, in float64, following powersgd.md 1.3 by hand.
std::vector<double> referenceWeights(int steps, double lr, double mu, double wd, const std::string& type) {
  std::vector<double> w{1, -2, 3}, m(3);
  for (int step = 0; step < steps; ++step) {
    for (size_t i = 0; i < w.size(); ++i) {
      double g = w[i] + wd * w[i];
      if (step == 0) {
        m[i] = g;
      } else {
        m[i] = type == "exponential_moving_average" ? mu * m[i] + (1 - mu) * g : mu * m[i] + g;
      }
      const double update = type == "nesterov" ? g + m[i] : m[i];
      w[i] -= lr * update;
    }
  }
  return w;
}

struct OptimizerCase {
  std::string type;
  double momentum;
  double weight_decay;
};

class OptimizerMatchesTheReference : public ::testing::TestWithParam<OptimizerCase> {};

TEST_P(OptimizerMatchesTheReference, OnAQuadratic) {
  const auto c = GetParam();
  auto config = quadraticConfig({"training.max_steps=3", "optimizer.momentum_type=" + c.type,
                                 "optimizer.momentum=" + std::to_string(c.momentum),
                                 "optimizer.weight_decay=" + std::to_string(c.weight_decay)});
  const auto expected = referenceWeights(3, 0.1, c.momentum, c.weight_decay, c.type);
  for (int world_size : {1, 2}) {
    TempDir dir;
    runRanks(world_size, [&](comm::Communicator& comm) {
      auto result = runWorker(resolve(config), RunOptions{dir.file("run")}, comm);
      EXPECT_EQ(result.training.steps, 3);
      const double loss = result.training.last_test.at("loss");
      double expected_loss = 0;
      for (double w : expected) expected_loss += 0.5 * w * w;
      EXPECT_NEAR(loss, expected_loss, 1e-5 * std::max(1.0, expected_loss)) << c.type;
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Momentum, OptimizerMatchesTheReference,
                         ::testing::Values(OptimizerCase{"nesterov", 0.9, 0.0},
                                           OptimizerCase{"nesterov", 0.0, 0.0},  // the 2g quirk
                                           OptimizerCase{"nesterov", 0.9, 0.01}, OptimizerCase{"heavy-ball", 0.9, 0.0},
                                           OptimizerCase{"exponential_moving_average", 0.9, 0.0}),
                         [](const auto& info) {
                           std::string name = info.param.type + "_" + std::to_string(info.index);
                           for (auto& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

// AdamW through the trainer on |w|^2/2, in float64 by hand: w (1-D) is not decayed, g = w is
// clipped to norm 1, and the rate is nanoGPT's cosine over the run's 5 steps after one warm-up step.
std::vector<double> adamWReferenceWeights(int steps) {
  std::vector<double> w{1, -2, 3}, m(3), v(3);
  for (int t = 1; t <= steps; ++t) {
    const double norm = std::sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]);
    const double clip = std::min(1.0 / (norm + 1e-6), 1.0);
    const int it = t - 1;
    const double lr = it < 1 ? 0.1 * (it + 1) / 2 : 0.01 + 0.5 * (1 + std::cos(M_PI * (it - 1) / 4.0)) * 0.09;
    for (size_t i = 0; i < w.size(); ++i) {
      const double g = w[i] * clip;
      m[i] = 0.9 * m[i] + 0.1 * g;
      v[i] = 0.999 * v[i] + 0.001 * g * g;
      w[i] -= lr * (m[i] / (1 - std::pow(0.9, t))) / (std::sqrt(v[i] / (1 - std::pow(0.999, t))) + 1e-8);
    }
  }
  return w;
}

const std::vector<std::string> kAdamW = {"optimizer.name=adamw",     "optimizer.schedule=cosine",
                                         "optimizer.warmup_steps=1", "optimizer.min_learning_rate=0.01",
                                         "optimizer.clip_norm=1",    "output.log_every_steps=1"};

std::vector<std::string> withAdamW(std::vector<std::string> assignments) {
  assignments.insert(assignments.begin(), kAdamW.begin(), kAdamW.end());
  return assignments;
}

TEST(Training, AdamWMatchesTheFormulaAndLogsItsRates) {
  auto config = quadraticConfig(withAdamW({"training.max_steps=5"}));
  const auto expected = adamWReferenceWeights(5);
  double expected_loss = 0;
  for (double w : expected) expected_loss += 0.5 * w * w;
  for (int world_size : {1, 2}) {
    TempDir dir;
    runRanks(world_size, [&](comm::Communicator& comm) {
      auto result = runWorker(resolve(config), RunOptions{dir.file("run")}, comm);
      EXPECT_EQ(result.training.steps, 5);
      EXPECT_NEAR(result.training.last_test.at("loss"), expected_loss, 1e-5 * expected_loss);
    });
    // Each step's log: the rate of the step just done (0-based index step - 1); the epoch's: the
    // next step's (at step 5, past the decay). No world-size factor.
    std::ifstream metrics(dir.file("run/metrics.jsonl"));
    int step_rates = 0, epoch_rates = 0;
    for (std::string line; std::getline(metrics, line);) {
      const auto event = YAML::Load(line);
      if (event["name"].as<std::string>() != "learning_rate") continue;
      const bool per_step = event["window"].IsDefined();
      const int it = event["step"].as<int>() - (per_step ? 1 : 0);
      const double rate = it < 1 ? 0.05 : it >= 5 ? 0.01 : 0.01 + 0.5 * (1 + std::cos(M_PI * (it - 1) / 4.0)) * 0.09;
      EXPECT_NEAR(event["value"].as<double>(), rate, 1e-15) << line;
      ++(per_step ? step_rates : epoch_rates);
    }
    EXPECT_EQ(step_rates, 5);
    EXPECT_EQ(epoch_rates, 2);  // the epochs of 4 steps end at steps 4 and 5
  }
}

// Each worker builds its task once and works out its batches per epoch once: the trainer takes
// the worker's count instead of asking the task again.
TEST(Training, EachWorkerBuildsItsTaskOnce) {
  TempDir dir;
  static BuildCounts counts;  // the registry outlives the test
  tasks::taskRegistry().add("counted-quadratic", "the quadratic task, counted (test)", {[&](const tasks::TaskContext&) {
                              return std::make_unique<CountedQuadraticTask>(counts);
                            }});
  const auto config = quadraticConfig({"task.name=counted-quadratic", "training.max_steps=2"});
  runRanks(2, [&](comm::Communicator& comm) { runWorker(resolve(config), RunOptions{dir.file("run")}, comm); });
  EXPECT_EQ(counts.built, 2);
  EXPECT_EQ(counts.batches_asked, 2);
}

std::map<std::string, at::Tensor> lastCheckpoint(const std::string& run_dir) {
  const auto manifest = YAML::LoadFile(run_dir + "/checkpoints/manifest.json");
  std::ifstream in(run_dir + "/checkpoints/" + manifest["files"][0]["file"].as<std::string>(), std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::map<std::string, at::Tensor> state;
  for (const auto& item : torch::pickle_load(bytes).toGenericDict()) {
    state[item.key().toStringRef()] = item.value().toTensor();
  }
  return state;
}

// 6 steps straight, and 3 steps + resume to 6: the same checkpoint, AdamW's moments and step
// included. decay_steps is set: 0 would follow each part's own training.max_steps.
TEST(Training, AdamWResumeIsExact) {
  TempDir dir;
  const auto run = [&](const std::string& run_dir, int64_t steps, bool resume) {
    auto config =
        quadraticConfig(withAdamW({"optimizer.decay_steps=6", "training.max_steps=" + std::to_string(steps)}));
    auto experiment = resolve(config);
    if (resume) experiment.resume = ResumedRun{run_dir, {}};
    runRanks(1, [&](comm::Communicator& comm) { runWorker(experiment, RunOptions{run_dir}, comm); });
  };
  run(dir.file("straight"), 6, false);
  run(dir.file("split"), 3, false);
  EXPECT_EQ(lastCheckpoint(dir.file("split")).at("adamw/step").item<int64_t>(), 3);
  run(dir.file("split"), 6, true);
  const auto want = lastCheckpoint(dir.file("straight"));
  const auto got = lastCheckpoint(dir.file("split"));
  ASSERT_TRUE(want.count("adamw/exp_avg/weight") && want.count("adamw/exp_avg_sq/weight"));
  EXPECT_EQ(want.at("adamw/step").item<int64_t>(), 6);
  EXPECT_EQ(want.size(), got.size());
  for (const auto& [name, tensor] : want) {
    if (name == "counter/elapsed_s") continue;
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_TRUE(torch::equal(tensor, got.at(name))) << name;
  }
}

// ---------------------------------------------------------------------------------------------
// Real training on the synthetic Fashion-MNIST task, several ranks as threads.

// Wraps the real task and, when the run ends, records the rank's final parameters.
class ProbeTask : public tasks::Task {
 public:
  struct Record {
    std::mutex mutex;
    std::map<int, std::vector<at::Tensor>> parameters;  // rank -> final parameters
  };

  ProbeTask(std::unique_ptr<tasks::Task> inner, Record& record) : inner_(std::move(inner)), record_(record) {}
  ~ProbeTask() override {
    std::vector<at::Tensor> params;
    for (const auto& p : inner_->model().parameters()) params.push_back(p.detach().clone());
    std::lock_guard<std::mutex> lock(record_.mutex);
    record_.parameters[rank_] = params;
  }

  torch::nn::Module& model() override { return inner_->model(); }
  int64_t batchesPerEpoch(const tasks::Shard& shard) const override {
    rank_ = shard.rank;
    return inner_->batchesPerEpoch(shard);
  }
  std::unique_ptr<tasks::BatchStream> trainBatches(const tasks::Shard& shard, int64_t epoch) override {
    return inner_->trainBatches(shard, epoch);
  }
  at::Tensor trainLoss(const tasks::Batch& batch, tasks::MetricSums& metrics) override {
    return inner_->trainLoss(batch, metrics);
  }
  tasks::MetricSums evaluate(const tasks::Shard& shard, const std::string& split,
                             const tasks::EvaluationLimits& limits) override {
    return inner_->evaluate(shard, split, limits);
  }
  bool synthetic() const override { return inner_->synthetic(); }

 private:
  std::unique_ptr<tasks::Task> inner_;
  Record& record_;
  mutable int rank_ = -1;
};

// What one step of `reducer` sends for these parameters (the reference's message sizes).
uint64_t floatsPerStep(const std::string& reducer, int64_t rank, const std::vector<at::Tensor>& params) {
  uint64_t floats = 0;
  for (const auto& p : params) {
    if (reducer == "exact" || p.dim() <= 1) {
      floats += p.numel();
    } else {
      const int64_t n = p.size(0), m = p.numel() / n;
      floats += std::min({n, m, rank}) * (n + m);
    }
  }
  return floats;
}

TEST(Training, RanksStayInLockstepAndCountTheirBits) {
  static ProbeTask::Record record;
  const auto fashion = tasks::taskRegistry().at("fashion-mnist").factory.make;
  tasks::taskRegistry().add(
      "fashion-probe", "fashion-mnist, recording final parameters (test)",
      {[fashion](const tasks::TaskContext& context) { return std::make_unique<ProbeTask>(fashion(context), record); }});
  for (const std::string reducer : {"exact", "powersgd"}) {
    TempDir dir;
    record.parameters.clear();
    auto config = layeredConfig("fashion-powersgd-rank2", "",
                                {"task.name=fashion-probe", "task.synthetic=true", "training.max_steps=2",
                                 "reducer.name=" + reducer, "output.sinks=[jsonl, csv]"});
    std::vector<uint64_t> bits(2);
    runRanks(2, [&](comm::Communicator& comm) {
      auto result = runWorker(resolve(config), RunOptions{dir.file("run")}, comm);
      EXPECT_EQ(result.training.steps, 2);
      EXPECT_TRUE(result.training.last_test.count("accuracy"));
      bits[comm.rank()] = result.training.bits;
    });
    ASSERT_EQ(record.parameters.size(), 2u);
    const auto& rank0 = record.parameters[0];
    const auto& rank1 = record.parameters[1];
    for (size_t i = 0; i < rank0.size(); ++i) EXPECT_TRUE(torch::equal(rank0[i], rank1[i])) << reducer << " " << i;
    EXPECT_EQ(bits[0], 2 * 32 * floatsPerStep(reducer, 2, rank0)) << reducer;
    EXPECT_EQ(bits[1], bits[0]);
  }
}

TEST(Training, SameSeedGivesIdenticalMetrics) {
  auto config = layeredConfig("fashion-powersgd-rank2", "",
                              {"task.synthetic=true", "training.max_steps=3", "output.sinks=[jsonl]"});
  std::vector<std::map<std::string, double>> tests;
  for (int run = 0; run < 2; ++run) {
    TempDir dir;
    runRanks(1, [&](comm::Communicator& comm) {
      tests.push_back(runWorker(resolve(config), RunOptions{dir.file("run")}, comm).training.last_test);
    });
  }
  ASSERT_EQ(tests.size(), 2u);
  EXPECT_EQ(tests[0], tests[1]);
}

}  // namespace
}  // namespace gcrun::experiments
