// The config errors: unknown keys, bad values, enums, nulls, lists, invalid YAML, and a failed apply.
#include <gtest/gtest.h>

#include <string>

#include "hyperparams/config_io.h"
#include "tests/support/config_fixtures.h"
#include "tests/support/user_error.h"

namespace gcrun::hyperparams {
namespace {

using gcrun::testing::expectMessageHas;
using gcrun::testing::userErrorOf;

std::string setError(const std::string& assignment) {
  ExperimentConfig config;
  return userErrorOf([&] { applyAssignment(config, assignment, keys()); });
}

std::string yamlError(const std::string& yaml, const std::string& source = "preset test") {
  ExperimentConfig config;
  return userErrorOf([&] { applyYaml(config, yaml, source, keys()); });
}

TEST(ConfigErrors, UnknownKeySuggestsTheClosest) {
  EXPECT_EQ(setError("training.epoch=3"),
            "config: unknown key 'training.epoch' in --set (did you mean 'training.epochs'?)");
  expectMessageHas(yamlError("trainin: {epochs: 3}"),
                   {"unknown key 'trainin.epochs'", "preset test", "did you mean 'training.epochs'"});
  expectMessageHas(setError("lerning_rate=0.1"), {"'lerning_rate'", "did you mean 'optimizer.learning_rate'"});
  expectMessageHas(setError("num_epoch=3"), {"did you mean 'num_epochs'"});
  const std::string far = setError("completely_unrelated=1");
  expectMessageHas(far, {"unknown key 'completely_unrelated' in --set", "gcrun list keys"});
  EXPECT_EQ(far.find("did you mean"), std::string::npos);
  expectMessageHas(yamlError("experiment: x"), {"unknown key 'experiment'"});
}

TEST(ConfigErrors, BadValuesNameKeySourceAndAcceptedText) {
  EXPECT_EQ(yamlError("training.epochs: abc", "preset fashion-sgd"),
            "config: training.epochs = 'abc' in preset fashion-sgd: expected an integer >= 1");
  expectMessageHas(setError("training.epochs=1.5"), {"training.epochs = '1.5' in --set", "an integer >= 1"});
  expectMessageHas(setError("training.epochs=[1, 2]"), {"training.epochs = '[1, 2]'"});
  expectMessageHas(setError("training.epochs=0"), {"training.epochs = '0'", "an integer >= 1"});
  expectMessageHas(setError("training.max_steps=-1"), {"an integer >= 0 (0: no limit)"});
  expectMessageHas(yamlError("training: {epochs: {a: 1}}"), {"training.epochs = '{a: 1}' in preset test"});
  expectMessageHas(setError("task.synthetic=maybe"), {"task.synthetic = 'maybe'", "true or false"});
  expectMessageHas(setError("optimizer.learning_rate=.nan"), {"optimizer.learning_rate = '.nan'", "a number > 0"});
  expectMessageHas(setError("optimizer.learning_rate=.inf"), {"a number > 0"});
  expectMessageHas(setError("optimizer.learning_rate=0"), {"a number > 0"});
  expectMessageHas(setError("optimizer.momentum=1"), {"optimizer.momentum = '1'", "a number in [0, 1)"});
  expectMessageHas(setError("optimizer.weight_decay_bn=-0.1"), {"a number >= 0"});
  expectMessageHas(setError("distributed.timeout_s=0"), {"distributed.timeout_s", "a number from 1 to 604800"});
  expectMessageHas(setError("reducer.rank=0"), {"reducer.rank = '0'", "an integer >= 1"});
  expectMessageHas(setError("reducer.name="), {"reducer.name = 'null'", "a non-empty name"});
  expectMessageHas(setError("output.log_every_steps=0"), {"output.log_every_steps"});
}

// The sync strategies' own settings (experiments/sync/): refused out of range, naming the key.
TEST(ConfigErrors, SyncSettingsAreChecked) {
  expectMessageHas(setError("sync.every=0"), {"sync.every = '0' in --set", "an integer >= 1"});
  expectMessageHas(setError("sync.every=-3"), {"sync.every = '-3'", "an integer >= 1"});
  expectMessageHas(setError("sync.warmup_steps=-1"), {"sync.warmup_steps", "an integer >= 0"});
  expectMessageHas(setError("sync.outer_learning_rate=0"), {"sync.outer_learning_rate = '0'", "a number > 0"});
  expectMessageHas(setError("sync.outer_momentum=1"), {"sync.outer_momentum = '1'", "a number in [0, 1)"});
  expectMessageHas(setError("sync.outer_momentum=-0.5"), {"sync.outer_momentum", "a number in [0, 1)"});
  expectMessageHas(setError("sync.outer_nesterov=maybe"), {"sync.outer_nesterov", "true or false"});
}

// Numbers reach the tensors as float: one past float's range would fail only at the first step,
// after the run directory exists (exit 1, "value cannot be converted to type float"). Refused
// here for every number key, built-in or declared, naming the key and the bound.
TEST(ConfigErrors, NumbersBeyondFloatAreRefusedNamingTheKey) {
  for (const char* key : {"optimizer.learning_rate", "sync.outer_learning_rate", "optimizer.weight_decay",
                          "optimizer.epsilon", "reducer.bucket_mb", "paper.value"}) {
    expectMessageHas(setError(std::string(key) + "=1e308"), {std::string(key) + " = '1e308' in --set", "3.4e38"});
    expectMessageHas(setError(std::string(key) + "=-1e39"), {std::string(key), "3.4e38"});
  }
  expectMessageHas(yamlError("optimizer: {learning_rate: 1e39}"), {"optimizer.learning_rate = '1e39'", "3.4e38"});
  ExperimentConfig config;
  applyAssignment(config, "optimizer.learning_rate=3e38", keys());
  EXPECT_EQ(config.optimizer.learning_rate, 3e38);
}

// Integers people type are plain decimals (hyperparams/base/decimal.h), the declared settings'
// (sync.*, task.*) as the built-in keys': no hex, octal, sign or exponent.
TEST(ConfigErrors, IntegersArePlainDecimals) {
  for (const char* key : {"sync.every", "sync.warmup_steps", "seed", "training.epochs", "task.width"}) {
    for (const char* value : {"0x10", "+16", "1e3", "16.0", " 16x"}) {
      expectMessageHas(setError(std::string(key) + "=" + value), {std::string(key) + " = '"});
    }
  }
  expectMessageHas(setError("sync.every=0x10"), {"sync.every = '0x10' in --set", "an integer >= 1"});
  expectMessageHas(setError("optimizer.learning_rate=0x1p-3"), {"optimizer.learning_rate = '0x1p-3'"});
  ExperimentConfig config;
  applyAssignment(config, "sync.every=010", keys());
  EXPECT_EQ(std::get<int64_t>(config.sync.settings.at("every")), 10);
}

TEST(ConfigErrors, EnumsListTheirChoices) {
  expectMessageHas(setError("optimizer.momentum_type=adam"),
                   {"optimizer.momentum_type = 'adam' in --set",
                    "expected one of: nesterov, heavy-ball, exponential_moving_average"});
  expectMessageHas(setError("device=gpu"), {"device = 'gpu'", "one of: cpu, cuda"});
  expectMessageHas(setError("distributed.backend=mpi"), {"one of: auto, gloo, nccl"});
  expectMessageHas(yamlError("distributed_backend: mpi"), {"distributed_backend (distributed.backend) = 'mpi'"});
}

TEST(ConfigErrors, NullOnlyWhereOptional) {
  expectMessageHas(setError("training.epochs=null"), {"training.epochs = 'null'", "an integer >= 1"});
  expectMessageHas(setError("optimizer.conv_learning_rate=0"), {"expected null or a number > 0"});
  expectMessageHas(setError("optimizer.weight_decay_conv=-1"), {"expected null or a number >= 0"});
  expectMessageHas(setError("optimizer.scale_lr_with_factor=-2"),
                   {"a number >= 0 or null (0 or null: the number of workers)"});
  auto config = fromYaml("optimizer: {weight_decay_conv: 0.5}\n");
  applyYaml(config, "optimizer.weight_decay_conv: null\n", "file later.yaml", keys());
  EXPECT_FALSE(config.optimizer.weight_decay_conv.has_value());
}

TEST(ConfigErrors, ListsAreChecked) {
  expectMessageHas(setError("optimizer.decay_at_epochs=[250, 150]"),
                   {"optimizer.decay_at_epochs = '[250, 150]'", "non-decreasing"});
  expectMessageHas(setError("optimizer.decay_at_epochs=[-1]"), {"numbers >= 0"});
  expectMessageHas(setError("optimizer.decay_at_epochs=[a]"), {"optimizer.decay_at_epochs = '[a]'"});
  expectMessageHas(setError("output.sinks=[]"), {"output.sinks = '[]'", "a non-empty list"});
  expectMessageHas(setError("output.sinks=[console, '']"), {"output.sinks = '[console, ]'"});
  expectMessageHas(setError("output.sinks=[[console]]"), {"output.sinks"});
}

TEST(ConfigErrors, OptimizerValuesAndTheirRanges) {
  expectMessageHas(setError("optimizer.beta1=1"), {"optimizer.beta1 = '1'", "a number in [0, 1)"});
  expectMessageHas(setError("optimizer.beta2=-0.1"), {"optimizer.beta2 = '-0.1'", "a number in [0, 1)"});
  expectMessageHas(setError("optimizer.epsilon=0"), {"optimizer.epsilon = '0'", "a number > 0"});
  expectMessageHas(setError("optimizer.weight_decay=-1e-4"), {"optimizer.weight_decay", "a number >= 0"});
  expectMessageHas(setError("optimizer.clip_norm=-1"), {"optimizer.clip_norm = '-1'", "a number >= 0"});
  expectMessageHas(setError("optimizer.warmup_steps=-1"), {"optimizer.warmup_steps", "an integer >= 0"});
  expectMessageHas(setError("optimizer.decay_steps=1.5"), {"optimizer.decay_steps", "(0: the run's total steps)"});
  expectMessageHas(setError("optimizer.min_learning_rate=-0.1"), {"optimizer.min_learning_rate", "a number >= 0"});
  expectMessageHas(setError("optimizer.name="), {"optimizer.name = 'null'", "a non-empty name"});

  auto config = fromYaml("optimizer: {warmup_steps: 20, decay_steps: 10}\n");
  expectMessageHas(userErrorOf([&] { validate(config, keys()); }),
                   {"optimizer.warmup_steps = 20 is above optimizer.decay_steps = 10"});
  config.optimizer.decay_steps = 0;  // the run's total steps: checked against nothing here
  EXPECT_NO_THROW(validate(config, keys()));
  config.optimizer.decay_steps = 20;
  EXPECT_NO_THROW(validate(config, keys()));
  config.optimizer.min_learning_rate = 0.2;
  expectMessageHas(userErrorOf([&] { validate(config, keys()); }),
                   {"optimizer.min_learning_rate = 0.2 is above optimizer.learning_rate = 0.1"});
}

// The names are the registries' to check, when the experiment resolves.
TEST(ConfigErrors, OptimizerNamesAreTheRegistries) {
  auto config = fromYaml("optimizer: {name: adam}\n");
  expectMessageHas(userErrorOf([&] { experiments::resolve(config); }),
                   {"optimizer.name: unknown optimizer 'adam'; known: adamw, sgd"});
  config = fromYaml("optimizer: {schedule: step}\n");
  expectMessageHas(userErrorOf([&] { experiments::resolve(config); }),
                   {"optimizer.schedule: unknown learning-rate schedule 'step'; known: cosine, reference"});
  config = fromYaml("optimizer: {name: adamw, wd_before_reduce: true}\n");
  expectMessageHas(userErrorOf([&] { experiments::resolve(config); }), {"optimizer.wd_before_reduce", "adamw"});
}

TEST(ConfigErrors, InvalidYamlNamesSourceAndLine) {
  expectMessageHas(yamlError("seed: 1\ntraining:\n  epochs: [1, 2\n  batch_size: 3\nx: {\n", "file run.yaml"),
                   {"config: invalid YAML in file run.yaml at line ", "column"});
  const std::string bad_indent = yamlError("seed: 1\ntraining:\n  epochs: 3\n batch_size: 4\n", "file run.yaml");
  expectMessageHas(bad_indent, {"invalid YAML in file run.yaml at line 4"});
  expectMessageHas(setError("training.epochs=[1,"), {"invalid YAML", "--set 'training.epochs=[1,'"});
}

TEST(ConfigErrors, DocumentMustBeAMapping) {
  expectMessageHas(yamlError("- a\n- b\n", "file list.yaml"), {"file list.yaml must be a YAML mapping", "'[a, b]'"});
  expectMessageHas(yamlError("just text", "preset odd"), {"preset odd must be a YAML mapping"});
}

TEST(ConfigErrors, AssignmentNeedsKeyEqualsValue) {
  expectMessageHas(setError("training.epochs"), {"--set 'training.epochs'", "key=value"});
  expectMessageHas(setError("=3"), {"--set '=3'", "key=value"});
}

TEST(ConfigErrors, FailedApplyLeavesConfigUnchanged) {
  ExperimentConfig config;
  userErrorOf([&] { applyYaml(config, "training.epochs: 9\ntraining.batch_size: 0\n", "preset test", keys()); });
  EXPECT_EQ(config.training.epochs, 1);
  userErrorOf([&] { applyAssignment(config, "task.synthetic=perhaps", keys()); });
  EXPECT_FALSE(config.task.synthetic);
}

}  // namespace
}  // namespace gcrun::hyperparams
