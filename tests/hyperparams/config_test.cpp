#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "experiments/sync/synchronizer.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/config_io.h"
#include "hyperparams/config_keys.h"
#include "hyperparams/settings.h"
#include "reducers/reducer.h"
#include "tasks/task.h"
#include "tests/support/config_fixtures.h"
#include "tests/support/user_error.h"

namespace gcrun::hyperparams {
namespace {

using gcrun::testing::expectMessageHas;
using gcrun::testing::userErrorOf;

// Every field differs from its default; doubles include ones that need 17 digits.
ExperimentConfig everyFieldChanged() {
  ExperimentConfig c;
  c.description = "Rank-2: PowerSGD # warm start";
  c.seed = 7;
  c.device = Device::cuda;
  c.task = {"cifar10", "resnet18", "/data/null", true, 250, 1000, {}};
  c.training = {300, 1200, 64};
  c.optimizer.learning_rate = 0.1 * 3;
  c.optimizer.conv_learning_rate = 1e-5;
  c.optimizer.momentum = 0.95;
  c.optimizer.momentum_type = MomentumType::exponential_moving_average;
  c.optimizer.weight_decay = 5e-4;
  c.optimizer.weight_decay_conv = 0.0;
  c.optimizer.weight_decay_other = 2.5e-4;
  c.optimizer.weight_decay_bn = 1e-6;
  c.optimizer.memory = false;
  c.optimizer.mom_before_reduce = true;
  c.optimizer.wd_before_reduce = true;
  c.optimizer.decay_at_epochs = {150, 250.5};
  c.optimizer.decay_with_factor = 3.0;
  c.optimizer.scale_lr_with_factor = 16;
  c.optimizer.warmup_epochs = 0.25;
  c.optimizer.name = "adamw";
  c.optimizer.beta1 = 0.8;
  c.optimizer.beta2 = 0.99;
  c.optimizer.epsilon = 1e-6;
  c.optimizer.decay_embeddings = true;
  c.optimizer.clip_norm = 1.5;
  c.optimizer.schedule = "cosine";
  c.optimizer.warmup_steps = 10;
  c.optimizer.decay_steps = 100;
  c.optimizer.min_learning_rate = 1e-3;
  c.reducer = {"powersgd", Granularity::model, 0.5, {{"rank", int64_t{2}}, {"reuse_query", false}}};
  c.distributed = {Backend::nccl, 1.0 + 1.0 / 3.0};
  c.output = {{"console", "tensorboard"}, 10, {}, "3-7"};
  return c;
}

void expectSameConfig(const ExperimentConfig& a, const ExperimentConfig& b) {
  EXPECT_EQ(a.description, b.description);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.task.name, b.task.name);
  EXPECT_EQ(a.task.architecture, b.task.architecture);
  EXPECT_EQ(a.task.data_dir, b.task.data_dir);
  EXPECT_EQ(a.task.synthetic, b.task.synthetic);
  EXPECT_EQ(a.task.test_batch_size, b.task.test_batch_size);
  EXPECT_EQ(a.training.epochs, b.training.epochs);
  EXPECT_EQ(a.training.max_steps, b.training.max_steps);
  EXPECT_EQ(a.training.batch_size, b.training.batch_size);
  const auto& x = a.optimizer;
  const auto& y = b.optimizer;
  EXPECT_EQ(x.learning_rate, y.learning_rate);
  EXPECT_EQ(x.conv_learning_rate, y.conv_learning_rate);
  EXPECT_EQ(x.momentum, y.momentum);
  EXPECT_EQ(x.momentum_type, y.momentum_type);
  EXPECT_EQ(x.weight_decay, y.weight_decay);
  EXPECT_EQ(x.weight_decay_conv, y.weight_decay_conv);
  EXPECT_EQ(x.weight_decay_other, y.weight_decay_other);
  EXPECT_EQ(x.weight_decay_bn, y.weight_decay_bn);
  EXPECT_EQ(x.memory, y.memory);
  EXPECT_EQ(x.mom_before_reduce, y.mom_before_reduce);
  EXPECT_EQ(x.wd_before_reduce, y.wd_before_reduce);
  EXPECT_EQ(x.decay_at_epochs, y.decay_at_epochs);
  EXPECT_EQ(x.decay_with_factor, y.decay_with_factor);
  EXPECT_EQ(x.scale_lr_with_factor, y.scale_lr_with_factor);
  EXPECT_EQ(x.warmup_epochs, y.warmup_epochs);
  EXPECT_EQ(x.name, y.name);
  EXPECT_EQ(x.beta1, y.beta1);
  EXPECT_EQ(x.beta2, y.beta2);
  EXPECT_EQ(x.epsilon, y.epsilon);
  EXPECT_EQ(x.decay_embeddings, y.decay_embeddings);
  EXPECT_EQ(x.clip_norm, y.clip_norm);
  EXPECT_EQ(x.schedule, y.schedule);
  EXPECT_EQ(x.warmup_steps, y.warmup_steps);
  EXPECT_EQ(x.decay_steps, y.decay_steps);
  EXPECT_EQ(x.min_learning_rate, y.min_learning_rate);
  EXPECT_EQ(a.reducer.name, b.reducer.name);
  EXPECT_EQ(a.reducer.granularity, b.reducer.granularity);
  EXPECT_EQ(a.reducer.bucket_mb, b.reducer.bucket_mb);
  // The reducers' settings: a dump writes those of the chosen reducer, so compare what they come to.
  EXPECT_EQ(toYaml(a, keys()), toYaml(b, keys()));
  EXPECT_EQ(a.distributed.backend, b.distributed.backend);
  EXPECT_EQ(a.distributed.timeout_s, b.distributed.timeout_s);
  EXPECT_EQ(a.output.sinks, b.output.sinks);
  EXPECT_EQ(a.output.log_every_steps, b.output.log_every_steps);
  EXPECT_EQ(a.output.trace, b.output.trace);
  EXPECT_EQ(a.output.layer_stats_every_steps, b.output.layer_stats_every_steps);
}

TEST(ConfigApply, EmptyDocumentChangesNothing) {
  const ExperimentConfig defaults;
  ExperimentConfig config;
  applyYaml(config, "", "preset empty", keys());
  applyYaml(config, "# only a comment\n", "preset empty", keys());
  expectSameConfig(config, defaults);
}

TEST(ConfigApply, LaterLayersOverrideOnlyWhatTheySet) {
  ExperimentConfig config;
  applyYaml(config, "training: {epochs: 3, batch_size: 32}\nseed: 5\n", "preset base", keys());
  applyYaml(config, "training.epochs: 4\noptimizer_learning_rate: 0.5\n", "file run.yaml", keys());
  applyAssignment(config, "training.epochs=6", keys());

  EXPECT_EQ(config.training.epochs, 6);            // all three layers set it: --set wins
  EXPECT_EQ(config.optimizer.learning_rate, 0.5);  // second layer only
  EXPECT_EQ(config.training.batch_size, 32);       // first layer only
  EXPECT_EQ(config.seed, 5);
  EXPECT_EQ(config.optimizer.momentum, 0.9);  // nobody: default
  EXPECT_EQ(config.reducer.name, "exact");
}

TEST(ConfigApply, NestedDottedAndAliasFormsAgree) {
  const auto nested = fromYaml(
      "training: {epochs: 90, batch_size: 64}\n"
      "optimizer: {learning_rate: 1.25, momentum: 0, decay_at_epochs: [60, 80], memory: false}\n"
      "reducer: {name: powersgd, rank: 2}\n");
  const auto dotted = fromYaml(
      "training.epochs: 90\ntraining.batch_size: 64\noptimizer.learning_rate: 1.25\n"
      "optimizer.momentum: 0\noptimizer.decay_at_epochs: [60, 80]\noptimizer.memory: false\n"
      "reducer.name: powersgd\nreducer.rank: 2\n");
  const auto aliases = fromYaml(
      "num_epochs: 90\noptimizer_batch_size: 64\noptimizer_learning_rate: 1.25\noptimizer_momentum: 0\n"
      "optimizer_decay_at_epochs: [60, 80]\noptimizer_memory: false\n"
      "optimizer_reducer: RankKReducer\noptimizer_reducer_rank: 2\n");
  const auto mixed = fromYaml(
      "num_epochs: 90\ntraining: {batch_size: 64}\noptimizer.learning_rate: 1.25\n"
      "optimizer: {momentum: 0, memory: false}\noptimizer_decay_at_epochs: [60, 80]\n"
      "reducer: {name: powersgd}\nreducer.rank: 2\n");
  EXPECT_EQ(nested.training.epochs, 90);
  EXPECT_EQ(nested.optimizer.decay_at_epochs, (std::vector<double>{60, 80}));
  EXPECT_EQ(nested.reducer.name, "powersgd");
  expectSameConfig(dotted, nested);
  expectSameConfig(aliases, nested);
  expectSameConfig(mixed, nested);
}

TEST(ConfigApply, AliasesTranslateReferenceValueNames) {
  EXPECT_EQ(fromYaml("optimizer_reducer: RankKReducer").reducer.name, "powersgd");
  EXPECT_EQ(fromYaml("optimizer_reducer: SignSGDwithMajorityVoteReducer").reducer.name, "signum");
  EXPECT_EQ(fromYaml("optimizer_reducer: UniformRandomSparseBlockReducer").reducer.name, "random-block");
  EXPECT_EQ(fromYaml("optimizer_reducer: topk").reducer.name, "topk");  // gcrun names pass through
  EXPECT_EQ(fromYaml("task: Cifar").task.name, "cifar10");
  EXPECT_EQ(fromYaml("task: LanguageModeling").task.name, "wikitext2");
  EXPECT_EQ(fromYaml("task: fashion-mnist").task.name, "fashion-mnist");
  // The translation belongs to the alias: the key itself takes the value as given.
  EXPECT_EQ(fromYaml("reducer.name: RankKReducer").reducer.name, "RankKReducer");
  // `task` with a mapping is the section, not the alias.
  const auto section = fromYaml("task: {name: cifar10, architecture: vgg16}");
  EXPECT_EQ(section.task.name, "cifar10");
  EXPECT_EQ(section.task.architecture, "vgg16");
}

TEST(ConfigApply, ReferenceScheduleKeys) {
  const auto config = fromYaml(
      "optimizer_scale_lr_with_factor: 16\noptimizer_scale_lr_with_warmup_epochs: 5\n"
      "optimizer_weight_decay_conv: 0.0001\noptimizer_weight_decay_other: 0.0001\noptimizer_weight_decay_bn: "
      "0.0\n"
      "optimizer_mom_before_reduce: true\noptimizer_wd_before_reduce: false\noptimizer_momentum_type: "
      "heavy-ball\n"
      "optimizer_conv_learning_rate: 0.2\noptimizer_reducer_reuse_query: false\ntask_architecture: ResNet18\n"
      "distributed_backend: gloo\nseed: 1\n");
  EXPECT_EQ(config.optimizer.scale_lr_with_factor, 16.0);
  EXPECT_EQ(config.optimizer.warmup_epochs, 5.0);
  EXPECT_EQ(config.optimizer.weight_decay_conv, 1e-4);
  EXPECT_EQ(config.optimizer.weight_decay_other, 1e-4);
  EXPECT_TRUE(config.optimizer.mom_before_reduce);
  EXPECT_EQ(config.optimizer.momentum_type, MomentumType::heavy_ball);
  EXPECT_EQ(config.optimizer.conv_learning_rate, 0.2);
  EXPECT_FALSE(std::get<bool>(config.reducer.settings.at("reuse_query")));
  EXPECT_EQ(config.task.architecture, "resnet18");  // the reference's spelling of the value too
  EXPECT_EQ(config.distributed.backend, Backend::gloo);
  EXPECT_EQ(config.seed, 1);
  // The reference's None for the factor means the number of workers, which gcrun spells 0.
  auto layered = fromYaml("optimizer_scale_lr_with_factor: 16\n");
  applyYaml(layered, "optimizer_scale_lr_with_factor: null\n", "file later.yaml", keys());
  EXPECT_EQ(layered.optimizer.scale_lr_with_factor, 0.0);
}

TEST(ConfigApply, AssignmentValuesAreYaml) {
  ExperimentConfig config;
  applyAssignment(config, "optimizer.decay_at_epochs=[150, 250]", keys());
  applyAssignment(config, " task.synthetic = yes", keys());
  applyAssignment(config, "optimizer.conv_learning_rate=0.05", keys());
  applyAssignment(config, "output.sinks=jsonl", keys());
  applyAssignment(config, "description=lr=0.1 run", keys());
  EXPECT_EQ(config.optimizer.decay_at_epochs, (std::vector<double>{150, 250}));
  EXPECT_TRUE(config.task.synthetic);
  EXPECT_EQ(config.optimizer.conv_learning_rate, 0.05);
  EXPECT_EQ(config.output.sinks, (std::vector<std::string>{"jsonl"}));
  EXPECT_EQ(config.description, "lr=0.1 run");  // split at the first '=' only

  applyAssignment(config, "optimizer.conv_learning_rate=null", keys());
  EXPECT_FALSE(config.optimizer.conv_learning_rate.has_value());
  config.task.data_dir = "/somewhere";
  applyAssignment(config, "task.data_dir=", keys());
  EXPECT_EQ(config.task.data_dir, "");
  applyAssignment(config, "optimizer.decay_at_epochs=", keys());
  EXPECT_TRUE(config.optimizer.decay_at_epochs.empty());
  applyAssignment(config, "task.synthetic=off", keys());
  EXPECT_FALSE(config.task.synthetic);
}

TEST(ConfigYaml, RoundTripReproducesEveryField) {
  const ExperimentConfig changed = everyFieldChanged();
  const std::string text = toYaml(changed, keys());
  ExperimentConfig reread;
  applyYaml(reread, text, "toYaml output", keys());
  expectSameConfig(reread, changed);
  EXPECT_EQ(toYaml(reread, keys()), text);

  ExperimentConfig defaults_reread = changed;  // null optionals must overwrite set ones
  defaults_reread.reducer.settings.clear();    // a dump of exact's has no powersgd settings to reset
  applyYaml(defaults_reread, toYaml(ExperimentConfig{}, keys()), "toYaml output", keys());
  expectSameConfig(defaults_reread, ExperimentConfig{});
}

TEST(ConfigYaml, LayoutIsNestedShortAndStable) {
  ExperimentConfig config;
  config.experiment = "cifar-powersgd";
  config.optimizer.decay_at_epochs = {150, 250};
  const std::string text = toYaml(config, keys());
  EXPECT_EQ(text.rfind("# experiment: cifar-powersgd\n", 0), 0u) << text;
  EXPECT_NE(text.find("\noptimizer:\n  name: sgd\n  learning_rate: 0.1\n  conv_learning_rate: null\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  weight_decay: 0.0001\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  decay_at_epochs: [150, 250]\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  sinks: [console, jsonl, csv]\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  decay_with_factor: 10\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  timeout_s: 300\n"), std::string::npos) << text;
  EXPECT_LT(text.find("\ntask:"), text.find("\ntraining:"));
  EXPECT_LT(text.find("\ntraining:"), text.find("\noptimizer:"));
  EXPECT_LT(text.find("\nreducer:"), text.find("\ndistributed:"));
  EXPECT_EQ(text.find("\nexperiment:"), std::string::npos) << "experiment is only a comment";
  EXPECT_EQ(toYaml(config, keys()), text);
}

TEST(ConfigYaml, NumbersUseTheShortestExactSpelling) {
  auto timeoutLine = [](double value) {
    ExperimentConfig config;
    config.distributed.timeout_s = value;
    const std::string text = toYaml(config, keys());
    const auto begin = text.find("timeout_s: ");
    return text.substr(begin, text.find('\n', begin) - begin);
  };
  EXPECT_EQ(timeoutLine(0.1 * 3), "timeout_s: 0.30000000000000004");
  EXPECT_EQ(timeoutLine(1234.5), "timeout_s: 1234.5");
  EXPECT_EQ(timeoutLine(3e5), "timeout_s: 300000");
  EXPECT_EQ(timeoutLine(2.5e-7), "timeout_s: 2.5e-07");
  EXPECT_EQ(timeoutLine(1e20), "timeout_s: 1e+20");
}

TEST(ConfigKeys, ListEveryKeyWithAcceptedTextHelpAndAliases) {
  const auto known = knownKeys(keys());
  std::set<std::string> names;
  for (const auto& info : known) {
    names.insert(info.key);
    EXPECT_FALSE(info.accepted.empty()) << info.key;
    EXPECT_FALSE(info.help.empty()) << info.key;
  }
  EXPECT_EQ(names.size(), known.size());
  // A dump writes the listed keys that its reducer and sync strategy read: the built-in ones and
  // their own settings.
  const auto dumpedKeys = [](const ExperimentConfig& config) {
    std::set<std::string> dumped;
    for (const auto& top : YAML::Load(toYaml(config, keys()))) {
      const auto name = top.first.as<std::string>();
      if (!top.second.IsMap()) {
        dumped.insert(name);
        continue;
      }
      for (const auto& leaf : top.second) dumped.insert(name + "." + leaf.first.as<std::string>());
    }
    return dumped;
  };
  // A task's own settings are dumped only where that task is selected, as a reducer's and a strategy's.
  std::set<std::string> task_settings;
  for (const auto* task : tasks::taskRegistry().entries()) {
    for (const auto& setting : task->factory.settings) task_settings.insert("task." + setting.name);
  }
  const auto ownSetting = [&](const std::string& key) {
    if (key == "reducer.name" || key == "reducer.granularity" || key == "reducer.bucket_mb" || key == "sync.strategy") {
      return false;
    }
    return key.rfind("reducer.", 0) == 0 || key.rfind("sync.", 0) == 0 || task_settings.count(key) > 0;
  };
  std::set<std::string> built_in;
  for (const auto& key : names) {
    if (!ownSetting(key)) built_in.insert(key);
  }
  std::set<std::string> every_owners;
  for (const auto* entry : reducers::reducerRegistry().entries()) {
    ExperimentConfig config;
    config.reducer.name = entry->name;
    auto expected = built_in;
    for (const auto& setting : entry->factory.settings) expected.insert("reducer." + setting.name);
    const auto dumped = dumpedKeys(config);
    EXPECT_EQ(dumped, expected) << entry->name;
    every_owners.insert(dumped.begin(), dumped.end());
  }
  for (const auto* entry : experiments::synchronizerRegistry().entries()) {
    ExperimentConfig config;  // the exact reducer, which reads no settings of its own
    config.sync.strategy = entry->name;
    auto expected = built_in;
    for (const auto& setting : entry->factory.settings) expected.insert("sync." + setting.name);
    const auto dumped = dumpedKeys(config);
    EXPECT_EQ(dumped, expected) << entry->name;
    every_owners.insert(dumped.begin(), dumped.end());
  }
  for (const auto* entry : tasks::taskRegistry().entries()) {
    ExperimentConfig config;
    config.task.name = entry->name;
    auto expected = built_in;
    for (const auto& setting : entry->factory.settings) expected.insert("task." + setting.name);
    const auto dumped = dumpedKeys(config);
    EXPECT_EQ(dumped, expected) << entry->name;
    every_owners.insert(dumped.begin(), dumped.end());
  }
  EXPECT_EQ(every_owners, names);
  for (const char* key : {"seed", "device", "description", "task.test_batch_size", "optimizer.weight_decay_bn",
                          "reducer.reuse_query", "distributed.timeout_s", "output.log_every_steps"}) {
    EXPECT_EQ(names.count(key), 1u) << key;
  }
  auto find = [&](const std::string& key) {
    return *std::find_if(known.begin(), known.end(), [&](const KeyInfo& k) { return k.key == key; });
  };
  EXPECT_EQ(find("training.epochs").aliases, (std::vector<std::string>{"num_epochs"}));
  EXPECT_EQ(find("optimizer.warmup_epochs").aliases,
            (std::vector<std::string>{"optimizer_scale_lr_with_warmup_epochs"}));
  EXPECT_EQ(find("training.epochs").accepted, "an integer >= 1");
  EXPECT_EQ(find("optimizer.momentum_type").accepted, "one of: nesterov, heavy-ball, exponential_moving_average");
}

TEST(ConfigValidate, NcclNeedsCuda) {
  ExperimentConfig config;
  config.distributed.backend = Backend::nccl;
  expectMessageHas(userErrorOf([&] { validate(config, keys()); }),
                   {"distributed.backend = 'nccl'", "device", "set device=cuda or distributed.backend=gloo"});
  config.device = Device::cuda;
  EXPECT_NO_THROW(validate(config, keys()));
  EXPECT_NO_THROW(validate(ExperimentConfig{}, keys()));
  EXPECT_NO_THROW(validate(everyFieldChanged(), keys()));
}

TEST(ConfigValidate, ChecksValuesSetInCode) {
  ExperimentConfig config;
  config.training.epochs = 0;
  expectMessageHas(userErrorOf([&] { validate(config, keys()); }), {"training.epochs = '0'", "an integer >= 1"});
  config = ExperimentConfig{};
  config.optimizer.learning_rate = std::numeric_limits<double>::quiet_NaN();
  expectMessageHas(userErrorOf([&] { validate(config, keys()); }), {"optimizer.learning_rate", "a number > 0"});
  config = ExperimentConfig{};
  config.output.sinks.clear();
  expectMessageHas(userErrorOf([&] { validate(config, keys()); }), {"output.sinks = '[]'"});
}

// Tasks and sinks declare settings of their own as reducers do: task.* with the selected task's
// default, output.* with the default of the first selected sink that declares it. A dump writes
// them where the config selects an owner or gives a value.
TEST(DeclaredSettings, TasksAndSinksDeclareTheirOwn) {
  struct TaskProbe {
    int64_t depth = 3;
  };
  struct Narrow {
    int64_t width = 80;
  };
  struct Wide {
    int64_t width = 120;
  };
  const auto narrow = SettingsSchema<Narrow>().add(&Narrow::width, "probe_width", integerAtLeast(1), "test");
  Extensions extensions;
  extensions.tasks = {
      {"probe-task",
       SettingsSchema<TaskProbe>().add(&TaskProbe::depth, "probe_depth", integerAtLeast(1), "test").specs()}};
  extensions.sinks = {
      {"narrow-sink", narrow.specs()},
      {"wide-sink", SettingsSchema<Wide>().add(&Wide::width, "probe_width", integerAtLeast(1), "test").specs()}};
  const ConfigKeys probes(extensions);

  ExperimentConfig config;
  auto yaml = YAML::Load(toYaml(config, probes));
  EXPECT_FALSE(yaml["task"]["probe_depth"]) << "fashion-mnist does not read it";
  EXPECT_FALSE(yaml["output"]["probe_width"]) << "no selected sink reads it";
  applyAssignment(config, "task.name=probe-task", probes);
  EXPECT_EQ(YAML::Load(toYaml(config, probes))["task"]["probe_depth"].as<int>(), 3);
  applyAssignment(config, "task.name=fashion-mnist", probes);
  applyAssignment(config, "task.probe_depth=5", probes);
  EXPECT_EQ(std::get<int64_t>(config.task.settings.at("probe_depth")), 5);
  EXPECT_TRUE(config.output.settings.empty());
  EXPECT_EQ(YAML::Load(toYaml(config, probes))["task"]["probe_depth"].as<int>(), 5) << "a value given is kept";
  applyAssignment(config, "output.sinks=[jsonl,wide-sink,narrow-sink]", probes);
  EXPECT_EQ(YAML::Load(toYaml(config, probes))["output"]["probe_width"].as<int>(), 120);
  applyAssignment(config, "output.probe_width=7", probes);
  EXPECT_EQ(narrow.read(config.output.settings).width, 7);
  EXPECT_EQ(YAML::Load(toYaml(config, probes))["output"]["probe_width"].as<int>(), 7);
  expectMessageHas(userErrorOf([&] { applyAssignment(config, "task.probe_depth=0", probes); }),
                   {"task.probe_depth", "an integer >= 1"});
  expectMessageHas(userErrorOf([&] { applyAssignment(config, "task.probe_depth=5", keys()); }),
                   {"unknown key 'task.probe_depth'"});
}

// Owners that disagree on a key, or claim a built-in one, are refused when the keys are computed.
TEST(DeclaredSettings, ClashesAreUserErrors) {
  struct Whole {
    int64_t width = 1;
  };
  struct Fraction {
    double width = 0.5;
  };
  Extensions extensions;
  extensions.sinks = {
      {"whole", SettingsSchema<Whole>().add(&Whole::width, "width", integerAtLeast(1), "test").specs()},
      {"fraction", SettingsSchema<Fraction>().add(&Fraction::width, "width", fraction(), "test").specs()}};
  expectMessageHas(userErrorOf([&] { ConfigKeys{extensions}; }),
                   {"output 'fraction' declares output.width as a number", "but 'whole' declares it as an integer"});
  extensions.sinks = {
      {"greedy", SettingsSchema<Whole>().add(&Whole::width, "sinks", integerAtLeast(1), "test").specs()}};
  expectMessageHas(userErrorOf([&] { ConfigKeys{extensions}; }),
                   {"output 'greedy' declares the setting output.sinks, a built-in key"});
}

}  // namespace
}  // namespace gcrun::hyperparams
