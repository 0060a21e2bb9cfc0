#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <limits>

#include <torch/torch.h>

#include "experiments/experiment.h"
#include "experiments/optimizers/lr_schedule.h"
#include "experiments/setup/presets.h"
#include "experiments/setup/resolved_experiment.h"
#include "experiments/setup/resolved_file.h"
#include "experiments/sync/gradient_exchange.h"
#include "experiments/sync/gradient_hooks.h"
#include "experiments/worker/runner.h"
#include "hyperparams/base/errors.h"
#include "reducers/reducer.h"
#include "tasks/models/models.h"
#include "tasks/task.h"
#include "tests/support/multi_rank.h"
#include "tests/support/temp_dir.h"

namespace gcrun::experiments {
namespace {

using testing::runRanks;
using testing::TempDir;

// ---------------------------------------------------------------------------------------------
// Gradient hooks: what the trainer starts the reduce from during backward.

TEST(GradientReadyHooks, FireOncePerParameterAfterItsGradientIsFinal) {
  auto shared = torch::tensor({2.0}, torch::requires_grad());  // used twice: one call, summed
  auto single = torch::tensor({3.0}, torch::requires_grad());
  auto unused = torch::tensor({4.0}, torch::requires_grad());
  const std::vector<at::Tensor> params{shared, single, unused};
  for (auto& p : params) p.mutable_grad() = torch::zeros_like(p);
  std::vector<std::pair<size_t, double>> calls;
  {
    GradientReadyHooks hooks(params, [&](size_t i) { calls.emplace_back(i, params[i].grad().item<double>()); });
    for (int backward = 0; backward < 2; ++backward) {
      for (auto& p : params) p.grad().zero_();
      (shared * single + shared * 5).backward();
    }
  }
  ASSERT_EQ(calls.size(), 4u);
  for (size_t k = 0; k < calls.size(); ++k) {
    const auto [index, grad] = calls[k];
    EXPECT_EQ(grad, index == 0 ? 8.0 : 2.0) << "call " << k;  // d/dshared = single + 5, d/dsingle = shared
  }
  (shared * 2).backward();  // the hooks are gone with their owner
  EXPECT_EQ(calls.size(), 4u);
}

// Records when ready() and reduce() come, and averages nothing: out = send, memory = 0.
class RecordingReducer : public reducers::Reducer {
 public:
  uint64_t reduce(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& out,
                  const std::vector<at::Tensor>& memory) override {
    events.push_back("reduce");
    for (size_t i = 0; i < send.size(); ++i) {
      out[i].copy_(send[i]);
      memory[i].zero_();
    }
    return 0;
  }
  void ready(size_t index, const std::vector<at::Tensor>& send) override {
    events.push_back("ready " + std::to_string(index) + " = " + std::to_string(send[index].sum().item<double>()));
  }
  std::vector<std::string> events;
};

TEST(GradientExchange, SendsEachGradientPlusMemoryDuringBackwardUnlessItClips) {
  for (double clip_norm : {0.0, 100.0}) {
    auto a = torch::tensor({1.0f, 2.0f}, torch::requires_grad());
    auto b = torch::tensor({3.0f}, torch::requires_grad());
    RecordingReducer reducer;
    GradientBuffers buffers({a, b});
    GradientExchange exchange({a, b}, {"a", "b"}, buffers, reducer, GradientExchange::Options{true, clip_norm},
                              [](size_t) {});
    buffers.memories[0].fill_(0.5);  // error feedback from an earlier step
    exchange.startStep(false);
    (a.sum() * 2 + b.sum() * 3).backward();
    // In whatever order backward produces them; a clipping task waits for the whole gradient.
    auto during = reducer.events;
    std::sort(during.begin(), during.end());
    const std::vector<std::string> sends = {"ready 0 = 5.000000", "ready 1 = 3.000000"};
    EXPECT_EQ(during, clip_norm == 0 ? sends : std::vector<std::string>{}) << "clip " << clip_norm;
    exchange.reduce();
    EXPECT_EQ(reducer.events.back(), "reduce");
    EXPECT_EQ(reducer.events.size(), 3u);
    EXPECT_TRUE(torch::equal(a.grad(), torch::tensor({2.5f, 2.5f})));  // 2 + 0.5 of memory
    EXPECT_TRUE(torch::equal(b.grad(), torch::tensor({3.0f})));
  }
}

TEST(GradientExchange, ANonFiniteLocalGradientIsNamedBeforeTheReduce) {
  auto a = torch::tensor({1.0f}, torch::requires_grad());
  auto b = torch::tensor({1.0f}, torch::requires_grad());
  RecordingReducer reducer;
  GradientBuffers buffers({a, b});
  GradientExchange exchange({a, b}, {"a", "b"}, buffers, reducer, {}, [](size_t) {});
  exchange.startStep(false);
  (a * std::numeric_limits<float>::quiet_NaN() + b).sum().backward();
  try {
    exchange.reduce();
    ADD_FAILURE() << "a NaN gradient must throw";
  } catch (const NonFiniteGradient& e) {
    EXPECT_STREQ(e.what(), "the local gradient of 'a' is not finite (nan or inf)");
  }
  EXPECT_EQ(std::count(reducer.events.begin(), reducer.events.end(), "reduce"), 0);
}

// ---------------------------------------------------------------------------------------------
// Learning-rate schedule, against the reference's formula worked by hand.

TEST(LearningRate, WarmsUpLinearlyToTheWorkerCountThenDecays) {
  OptimizerOptions options;
  options.warmup_epochs = 5;
  options.decay_at_epochs = {150, 250};
  options.decay_with_factor = 10;
  EXPECT_DOUBLE_EQ(learningRate(options, 0.1, 16, 0.0), 0.1);
  EXPECT_DOUBLE_EQ(learningRate(options, 0.1, 16, 2.5), 0.1 * (1 + 15 * 0.5));
  EXPECT_DOUBLE_EQ(learningRate(options, 0.1, 16, 5.0), 1.6);
  EXPECT_DOUBLE_EQ(learningRate(options, 0.1, 16, 149.99), 1.6);
  EXPECT_NEAR(learningRate(options, 0.1, 16, 150.0), 0.16, 1e-12);
  EXPECT_NEAR(learningRate(options, 0.1, 16, 299.0), 0.016, 1e-12);
}

TEST(LearningRate, ExplicitFactorAndNoWarmup) {
  OptimizerOptions options;
  options.scale_lr_with_factor = 4;
  options.warmup_epochs = 0;
  EXPECT_DOUBLE_EQ(learningRate(options, 0.5, 16, 0.0), 2.0);
}

// ---------------------------------------------------------------------------------------------
// Message sizes on the paper's ResNet-18 (CIFAR shapes), floats per worker and step, as the
// reference sends them (powersgd.md section 2).

TEST(PaperMessageSizes, ResNet18SendsWhatTheReferenceSends) {
  auto model = tasks::models::buildModel("resnet18", {3, 32, 10}, /*seed=*/42);
  std::vector<at::Tensor> shapes;
  for (const auto& p : model->parameters()) shapes.push_back(torch::zeros_like(p));
  const std::vector<std::tuple<std::string, int64_t, uint64_t>> cases = {{"exact", 1, 11173962},
                                                                         {"powersgd", 1, 45935},
                                                                         {"powersgd", 2, 82260},
                                                                         {"powersgd", 4, 154910},
                                                                         {"powersgd", 7, 263885}};
  runRanks(1, [&](comm::Communicator& comm) {
    for (const auto& [name, rank, floats] : cases) {
      ReducerOptions options;
      options.name = name;
      options.settings["rank"] = int64_t{rank};
      auto reducer = reducers::reducerRegistry().at(name).factory.make({comm, options, /*seed=*/42, /*parameters=*/{}});
      std::vector<at::Tensor> send, out, memory;
      for (const auto& t : shapes) {
        send.push_back(torch::ones_like(t));
        out.push_back(torch::empty_like(t));
        memory.push_back(torch::empty_like(t));
      }
      EXPECT_EQ(reducer->reduce(send, out, memory), 32 * floats) << name << " rank " << rank;
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Presets and layered configuration.

TEST(Presets, EveryPresetResolvesAndPassesTheRegistryChecks) {
  const auto presets = listPresets();
  ASSERT_GE(presets.size(), 4u);
  for (const auto& preset : presets) {
    EXPECT_FALSE(preset.description.empty()) << preset.name;
    const auto config = layeredConfig(preset.name, "", {});
    EXPECT_EQ(config.experiment, preset.name);
    EXPECT_NO_THROW(resolve(config)) << preset.name;
  }
}

TEST(Presets, ConfigFileOverridesThePresetAndSetOverridesBoth) {
  TempDir dir;
  std::ofstream(dir.file("over.yaml")) << "training:\n  epochs: 7\n  batch_size: 16\nreducer:\n  rank: 3\n";
  const auto config = layeredConfig("fashion-powersgd-rank2", dir.file("over.yaml"), {"training.epochs=9"});
  EXPECT_EQ(config.reducer.name, "powersgd");                           // preset
  EXPECT_EQ(std::get<int64_t>(config.reducer.settings.at("rank")), 3);  // file over preset
  EXPECT_EQ(config.training.batch_size, 16);                            // file
  EXPECT_EQ(config.training.epochs, 9);                                 // --set over file
  EXPECT_EQ(config.seed, ExperimentConfig{}.seed);                      // default
}

TEST(Presets, UnknownPresetAndMissingFileNameWhatIsWrong) {
  try {
    layeredConfig("fashion-powersgd-rank3", "", {});
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown experiment 'fashion-powersgd-rank3'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("fashion-powersgd-rank2"), std::string::npos);
  }
  try {
    layeredConfig("fashion-sgd", "/nonexistent/x.yaml", {});
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/x.yaml"), std::string::npos);
  }
}

TEST(CheckConfig, RejectsUnknownRegistryNamesBeforeTraining) {
  auto config = layeredConfig("fashion-sgd", "", {"reducer.name=nope"});
  EXPECT_THROW(resolve(config), UserError);
  config = layeredConfig("fashion-sgd", "", {"output.sinks=[console, nope]"});
  EXPECT_THROW(resolve(config), UserError);
  config = layeredConfig("fashion-sgd", "", {"task.name=nope"});
  EXPECT_THROW(resolve(config), UserError);
}

// Error feedback on an unbiased quantizer (QSGD diverged with it: bench/qsgd-finding.md) is warned
// of, naming the key and the reducer; on a contractive compressor, or without memory, nothing.
TEST(CheckConfig, WarnsOfErrorFeedbackOnAnUnbiasedQuantizer) {
  for (const std::string reducer : {"qsgd", "terngrad"}) {
    const auto warning = errorFeedbackWarning(
        resolve(layeredConfig("fashion-sgd", "", {"reducer.name=" + reducer, "optimizer.memory=true"})));
    EXPECT_EQ(warning.rfind("optimizer.memory: reducer '" + reducer + "'", 0), 0u) << warning;
    EXPECT_TRUE(errorFeedbackWarning(
                    resolve(layeredConfig("fashion-sgd", "", {"reducer.name=" + reducer, "optimizer.memory=false"})))
                    .empty());
  }
  EXPECT_TRUE(
      errorFeedbackWarning(resolve(layeredConfig("fashion-sgd", "", {"reducer.name=topk", "optimizer.memory=true"})))
          .empty());
}

// One resolution of a request: its settings, what they name and output.trace's window.
TEST(ResolveExperiment, ARequestIsResolvedOnce) {
  ExperimentRequest request;
  request.preset = "fashion-powersgd-rank2";
  request.assignments = {"output.trace=3-5", "training.epochs=2"};
  const auto experiment = resolveExperiment(request);
  EXPECT_EQ(experiment.config.experiment, "fashion-powersgd-rank2");
  EXPECT_EQ(experiment.config.training.epochs, 2);
  EXPECT_EQ(experiment.reducer.collective, reducers::reducerRegistry().at("powersgd").factory.collective);
  ASSERT_TRUE(experiment.trace_window.has_value());
  EXPECT_EQ(experiment.trace_window->first, 3);
  EXPECT_EQ(experiment.trace_window->last, 5);
  EXPECT_EQ(experiment.config.sources.at("training.epochs"), "--set training.epochs=2");
  EXPECT_EQ(experiment.config_yaml, resolve(layeredConfig(request.preset, "", request.assignments)).config_yaml);
}

// What a launcher's worker starts from is what the launcher resolved, sources included, whatever
// its values hold.
TEST(ResolveExperiment, TheResolvedFileGivesTheWorkerTheSameExperiment) {
  TempDir dir;
  ExperimentRequest request;
  request.preset = "fashion-sgd";
  request.assignments = {"description=\"two\\nlines # not a comment: 'quoted'\"", "training.max_steps=3"};
  const auto experiment = resolveExperiment(request);
  std::ofstream(dir.file("resolved.yaml")) << resolvedFileText(experiment);
  const auto worker = readResolvedFile(dir.file("resolved.yaml"));
  EXPECT_EQ(worker.config_yaml, experiment.config_yaml);
  EXPECT_EQ(worker.config.experiment, "fashion-sgd");
  EXPECT_EQ(worker.config.description, experiment.config.description);
  EXPECT_EQ(worker.config.sources, experiment.config.sources);
  std::ofstream(dir.file("other.yaml")) << "training: {epochs: 2}\n";
  EXPECT_THROW(readResolvedFile(dir.file("other.yaml")), UserError);
}

// The launcher refuses a task's bad input before any worker starts with the task's own check,
// which builds no model, where the task has one (TaskSpec::check).
TEST(Launcher, ChecksATasksInputWithoutBuildingIt) {
  TempDir dir;
  static int built = 0;
  static int checked_for = 0;
  auto spec = tasks::taskRegistry().at("fashion-mnist").factory;
  spec.make = [make = spec.make](const tasks::TaskContext& context) {
    ++built;
    return make(context);
  };
  spec.check = [](const tasks::TaskContext&, int world_size) {
    checked_for = world_size;
    throw UserError("task.data_dir: refused by the task's check");
  };
  tasks::taskRegistry().add("checked-fashion", "Fashion-MNIST with an input check (test)", spec);
  ExperimentRequest request;
  request.preset = "fashion-sgd";
  request.assignments = {"task.name=checked-fashion", "task.synthetic=true", "distributed.simulated_workers=2"};
  request.output_dir = dir.file("run");
  request.launch.nproc_per_node = 3;
  try {
    runExperiment(request);
    ADD_FAILURE() << "the launcher started its workers";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "task.data_dir: refused by the task's check");
  }
  EXPECT_EQ(built, 0);
  EXPECT_EQ(checked_for, 6);
}

}  // namespace
}  // namespace gcrun::experiments
