// The memory a run needs, estimated from its settings before anything is built: every registered
// task's model size against the model it builds, and a run too large for the machine refused by
// the setting most responsible, exit 2, before its run directory exists (issue 41, item 7).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "experiments/setup/memory_estimate.h"
#include "experiments/setup/registered_keys.h"
#include "experiments/setup/resolved_experiment.h"
#include "hyperparams/config_io.h"
#include "tasks/models/models.h"
#include "tasks/task.h"
#include "tests/support/command.h"
#include "tests/support/temp_dir.h"
#include "tests/support/user_error.h"

namespace gcrun::experiments {
namespace {

using testing::expectMessageHas;
using testing::userErrorOf;

const std::string kGcrun = GCRUN_BINARY_PATH;

int64_t elementsOf(torch::nn::Module& model) {
  int64_t total = 0;
  for (const auto& p : model.parameters()) total += p.numel();
  return total;
}

// A task of `name` on small synthetic data, with `settings` (key=value) over the defaults.
ExperimentConfig taskConfig(const std::string& name, const std::string& architecture,
                            const std::vector<std::string>& settings) {
  ExperimentConfig config;
  config.task.name = name;
  config.task.architecture = architecture;
  config.task.synthetic = true;
  config.task.synthetic_samples = 2000;
  const auto keys = configKeys();
  for (const auto& setting : settings) hyperparams::applyAssignment(config, setting, keys);
  return config;
}

TEST(MemoryEstimate, EveryTasksModelSizeIsTheParameterCountItBuilds) {
  const struct {
    std::string task, architecture;
    std::vector<std::string> settings;
  } cases[] = {
      {"fashion-mnist", "cnn", {}},
      {"fashion-mnist", "resnet18", {}},
      {"cifar10", "resnet18", {}},
      {"cifar10", "vgg16", {}},
      {"wikitext2", "lstm", {}},
      {"language-model", "gpt", {"task.width=32", "task.layers=2", "task.heads=2", "task.context=16"}},
      {"language-model",
       "gpt",
       {"task.level=word", "task.bias=false", "task.width=24", "task.layers=3", "task.heads=4", "task.context=8"}}};
  std::set<std::string> covered;
  for (const auto& c : cases) {
    const auto config = taskConfig(c.task, c.architecture, c.settings);
    const auto& spec = tasks::taskRegistry().at(c.task).factory;
    ASSERT_TRUE(spec.size) << c.task;
    const auto task = spec.make(tasks::TaskContext{config.task, 4, 1, c10::kCPU});
    EXPECT_EQ(spec.size(config.task, 4).parameterCount(), static_cast<double>(elementsOf(task->model())))
        << c.task << " " << c.architecture;
    covered.insert(c.task);
  }
  for (const auto* entry : tasks::taskRegistry().entries()) EXPECT_TRUE(covered.count(entry->name)) << entry->name;
}

TEST(MemoryEstimate, EveryArchitecturesSizeIsTheParameterCountItBuilds) {
  for (const auto* entry : tasks::models::modelRegistry().entries()) {
    const std::vector<tasks::models::ModelSpec> specs = {{1, 28, 10}, {3, 32, 10}, {3, 32, 100}};
    for (const auto& spec : specs) {
      if (entry->name == "vgg16" && spec.image_size != 32) continue;  // it takes 32x32 images only
      const auto model = tasks::models::buildModel(entry->name, spec, 1);
      EXPECT_EQ(entry->factory.size(spec).parameterCount(), static_cast<double>(elementsOf(*model)))
          << entry->name << " " << spec.in_channels << "x" << spec.image_size;
    }
  }
}

// A config of `preset` with `assignments`, resolved: the memory check runs in resolve().
std::string refusal(const std::string& preset, const std::vector<std::string>& assignments) {
  return userErrorOf([&] { resolve(layeredConfig(preset, "", assignments)); });
}

TEST(MemoryEstimate, ARunTooLargeIsRefusedNamingTheSettingMostResponsible) {
  const auto start = std::chrono::steady_clock::now();
  expectMessageHas(refusal("brown-gpt-adamw", {"task.width=100000"}),
                   {"task.width: this run needs about", "GiB of memory per process", "more than this machine's"});
  expectMessageHas(refusal("brown-gpt-adamw", {"task.layers=1000000"}), {"task.layers: ", "lower task.layers"});
  // 2^62: the sizes are doubles, so the estimate is huge rather than an overflowed int64.
  expectMessageHas(refusal("brown-gpt-adamw", {"task.width=4611686018427387904"}), {"task.width: "});
  expectMessageHas(refusal("brown-gpt-adamw", {"task.context=30000"}), {"task.context: "});
  // Both large: the one whose default shrinks the estimate most.
  expectMessageHas(refusal("brown-gpt-adamw", {"task.width=100000", "task.layers=100"}), {"task.width: "});
  expectMessageHas(refusal("brown-gpt-adamw", {"task.width=4096", "task.layers=100000"}), {"task.layers: "});
  expectMessageHas(refusal("brown-gpt-adamw", {"training.batch_size=100000000"}), {"training.batch_size: "});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  // The presets themselves fit.
  EXPECT_NO_THROW(resolve(layeredConfig("brown-gpt-adamw", "", {})));
  EXPECT_NO_THROW(resolve(layeredConfig("cifar-powersgd-rank2", "", {})));
}

TEST(MemoryEstimate, StrategiesAddWhatTheyKeep) {
  const auto config = layeredConfig("brown-gpt-adamw", "", {});
  const auto plain = resolve(config);
  auto diloco_config = config;
  hyperparams::applyAssignment(diloco_config, "sync.strategy=diloco", configKeys());
  const auto diloco = resolve(diloco_config);
  const double parameters = plain.task.size(config.task, config.training.batch_size).parameterCount();
  // θ_g, the outer momentum and the replicas' mean: three float copies more.
  EXPECT_DOUBLE_EQ(estimatedBytes(diloco) - estimatedBytes(plain), 3 * parameters * sizeof(float));
  // demo's DCT matrices with DeMo's codec (reducer dct-topk): per tensor side min(its rows or columns,
  // reducer.block), squared, float64 and float; another reducer holds none.
  const tasks::ModelSize one_matrix{{{{1000, 1000}}}};
  const auto& demo = synchronizerRegistry().at("demo").factory;
  auto demo_config = config;
  EXPECT_DOUBLE_EQ(demo.memory(demo_config, one_matrix), 0.0);
  hyperparams::applyAssignment(demo_config, "reducer.name=dct-topk", configKeys());
  hyperparams::applyAssignment(demo_config, "reducer.block=64", configKeys());
  EXPECT_DOUBLE_EQ(demo.memory(demo_config, one_matrix), 2 * 64 * 64 * 12.0);
  hyperparams::applyAssignment(demo_config, "reducer.block=4096", configKeys());
  EXPECT_DOUBLE_EQ(demo.memory(demo_config, one_matrix), 2 * 1000 * 1000 * 12.0);
  // Beyond that a block's matrix is refused as a setting (the sync.block=1e6: 80 GB).
  expectMessageHas(
      userErrorOf([&] { hyperparams::applyAssignment(demo_config, "reducer.block=1000000", configKeys()); }),
      {"reducer.block = '1000000'", "an integer from 1 to 4096"});
}

TEST(MemoryEstimate, ARefusalComesFromTheBinaryBeforeTheRunDirectoryExists) {
  testing::TempDir dir;
  const auto out = dir.file("runs");
  const auto start = std::chrono::steady_clock::now();
  for (const char* setting : {"task.width=100000", "task.layers=1000000", "task.context=30000",
                              "optimizer.learning_rate=1e308", "sync.outer_learning_rate=1e308"}) {
    const auto result = testing::runCommand(kGcrun + " experiment brown-gpt-adamw --set sync.strategy=diloco --set " +
                                            setting + " --output-dir " + out);
    EXPECT_EQ(result.exit_code, 2) << result.output;
    const std::string key = std::string(setting).substr(0, std::string(setting).find('='));
    EXPECT_EQ(result.output.rfind("gcrun: error: ", 0), 0u) << result.output;
    EXPECT_NE(result.output.find(key), std::string::npos) << result.output;
    EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1) << result.output;
  }
  // No run directory: at most the record of the refusal that every refused run leaves.
  if (std::filesystem::exists(out)) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(out)) {
      EXPECT_EQ(entry.path().string().find("checkpoints"), std::string::npos) << entry.path();
      EXPECT_EQ(entry.path().string().find("metrics"), std::string::npos) << entry.path();
    }
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

}  // namespace
}  // namespace gcrun::experiments
