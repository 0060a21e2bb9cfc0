// Where each value of a resolved configuration came from: every layer, the line of a --config
// file's key, later layers winning, and the annotated YAML reading back as the same configuration.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "experiments/setup/resolved_experiment.h"
#include "hyperparams/config_io.h"
#include "tests/support/temp_dir.h"

namespace {

using gcrun::ExperimentConfig;
using gcrun::experiments::configKeys;
using gcrun::experiments::layeredConfig;
using gcrun::testing::TempDir;

std::string writeFile(const TempDir& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir.file(name)) << text;
  return dir.file(name);
}

TEST(ConfigSources, EveryKeyNamesItsLayer) {
  TempDir dir;
  const auto file =
      writeFile(dir, "over.yaml", "# a comment line\nseed: 7\ntraining:\n  epochs: 2\noptimizer_momentum: 0.5\n");
  const auto config = layeredConfig("fashion-sgd", file, {"training.epochs=9", "device=cpu"});
  const auto& sources = config.sources;
  EXPECT_EQ(sources.at("task.synthetic"), "default");
  EXPECT_EQ(sources.at("reducer.name"), "preset fashion-sgd");
  EXPECT_EQ(sources.at("training.batch_size"), "preset fashion-sgd");
  EXPECT_EQ(sources.at("seed"), "--config " + file + ":2");
  // An alias is recorded under the key it stands for, at its own line.
  EXPECT_EQ(sources.at("optimizer.momentum"), "--config " + file + ":5");
  // --set overrides the file's training.epochs (line 4) and says so in its own spelling.
  EXPECT_EQ(config.training.epochs, 9);
  EXPECT_EQ(sources.at("training.epochs"), "--set training.epochs=9");
  EXPECT_EQ(sources.at("device"), "--set device=cpu");
  // Every key has a source, a reducer's own settings included.
  const auto keys = configKeys();
  for (const auto& spec : keys.keys()) EXPECT_EQ(sources.count(spec.key), 1u) << spec.key;
}

TEST(ConfigSources, AFileKeyKeepsTheLineWhereItIsNested) {
  TempDir dir;
  const auto file = writeFile(dir, "nested.yaml", "optimizer:\n  momentum: 0.8\n\n  learning_rate: 0.5\n");
  const auto config = layeredConfig("fashion-powersgd-rank2", file, {});
  EXPECT_EQ(config.sources.at("optimizer.momentum"), "--config " + file + ":2");
  EXPECT_EQ(config.sources.at("optimizer.learning_rate"), "--config " + file + ":4");
  EXPECT_EQ(config.sources.at("reducer.rank"), "preset fashion-powersgd-rank2");
}

TEST(ConfigSources, ARefusedLayerRecordsNothing) {
  const auto keys = configKeys();
  ExperimentConfig config;
  auto sources = gcrun::hyperparams::defaultSources(keys);
  EXPECT_THROW(gcrun::hyperparams::applyAssignment(config, "training.epochs=0", keys, &sources), gcrun::UserError);
  EXPECT_THROW(
      gcrun::hyperparams::applyYaml(config, "seed: 3\nseeed: 4\n", "file x", keys, {&sources, "--config x", true}),
      gcrun::UserError);
  EXPECT_EQ(sources, gcrun::hyperparams::defaultSources(keys));
}

TEST(ConfigSources, TheAnnotatedYamlReadsBackAsTheSameConfiguration) {
  // A value with a newline and a '#' must neither end the comment nor start one.
  const auto config =
      layeredConfig("fashion-sgd", "", {"description=\"two\\nlines # not a comment\"", "reducer.name=powersgd"});
  const auto keys = configKeys();
  const auto text = gcrun::hyperparams::toYamlWithSources(config, keys, config.sources);
  EXPECT_NE(text.find("training.epochs: 3"), std::string::npos) << text;
  EXPECT_NE(text.find("# preset fashion-sgd\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# --set reducer.name=powersgd\n"), std::string::npos) << text;
  // The chosen reducer's own settings are written, with their defaults.
  EXPECT_NE(text.find("reducer.rank: "), std::string::npos) << text;
  EXPECT_NE(text.find("# default\n"), std::string::npos) << text;
  ExperimentConfig again;
  gcrun::hyperparams::applyYaml(again, text, "the annotated YAML", keys);
  again.experiment = config.experiment;
  EXPECT_EQ(gcrun::hyperparams::toYaml(again, keys), gcrun::hyperparams::toYaml(config, keys));
}

}  // namespace
