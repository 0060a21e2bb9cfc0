// The brown-gpt-nanogpt preset against nanoGPT's train.py and model.py (karpathy/nanoGPT): no
// biases, and AdamW's weight decay on exactly the tensors nanoGPT's configure_optimizers decays,
// every one of 2 or more dims (the embeddings wte and wpe included) and no 1-D one. The decay is
// observed through the optimizer the preset makes: with zero gradients a step moves a parameter by
// its decay alone. The brown-gpt-* presets keep their own groups, which their descriptions name.
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "experiments/setup/resolved_experiment.h"
#include "tasks/task.h"
#include "tests/experiments/optimizers/optimizer_fixtures.h"

namespace gcrun::experiments {
namespace {

struct DecayGroups {
  std::set<std::string> decayed, kept;
  std::set<std::string> matrices;  // the parameters of 2 or more dims: nanoGPT's decay group
};

// `preset`'s GPT (on synthetic data) and the optimizer it makes, one step at 0-based step 0 with zero
// gradients and no warm-up, so the full rate's decay shows in float32.
DecayGroups decayGroupsOf(const std::string& preset) {
  const auto experiment = resolve(layeredConfig(preset, "", {"task.synthetic=true", "optimizer.warmup_steps=0"}));
  const ExperimentConfig& config = experiment.config;
  auto task = experiment.task.make(tasks::TaskContext{config.task, config.training.batch_size, 1, c10::kCPU});
  testing::Model model;
  for (const auto& item : task->model().named_parameters()) model.add(item.key(), item.value().detach().clone());
  const auto optimizer =
      experiment.optimizer.make(OptimizerContext{config.optimizer, model.params, model.names, model.grads,
                                                 task->embeddingParameters(), 1, config.training.max_steps});
  const testing::Model before = model.clone();
  testing::stepWith(*optimizer, model, {}, 0);
  const double shrink = 1 - config.optimizer.learning_rate * config.optimizer.weight_decay;
  DecayGroups groups;
  for (size_t i = 0; i < model.params.size(); ++i) {
    const std::string& name = model.names[i];
    if (before.params[i].dim() >= 2) groups.matrices.insert(name);
    if (model.params[i].equal(before.params[i])) {
      groups.kept.insert(name);
      continue;
    }
    groups.decayed.insert(name);
    EXPECT_TRUE(torch::allclose(model.params[i], before.params[i] * shrink, 1e-6, 0)) << name << " moved otherwise";
  }
  return groups;
}

TEST(NanoGptPreset, DecaysEveryTensorOfTwoOrMoreDimsAndHasNoBiases) {
  const DecayGroups groups = decayGroupsOf("brown-gpt-nanogpt");
  EXPECT_EQ(groups.decayed, groups.matrices);
  EXPECT_EQ(groups.decayed.count("transformer.wte.weight"), 1u);
  EXPECT_EQ(groups.decayed.count("transformer.wpe.weight"), 1u);
  // What stays undecayed is the LayerNorm weights, one per ln_1, ln_2 and ln_f; no bias anywhere.
  EXPECT_EQ(groups.kept.size(), 2u * 4 + 1);
  for (const auto& name : groups.kept) EXPECT_NE(name.find(".ln_"), std::string::npos) << name;
  for (const auto& name : groups.decayed) EXPECT_EQ(name.find(".bias"), std::string::npos) << name;
}

TEST(NanoGptPreset, TheOtherBrownGptPresetsKeepBiasesAndTheEmbeddingsUndecayedAsTheyDescribe) {
  const DecayGroups groups = decayGroupsOf("brown-gpt-adamw");
  std::set<std::string> expected = groups.matrices;
  expected.erase("transformer.wte.weight");
  expected.erase("transformer.wpe.weight");
  EXPECT_EQ(groups.decayed, expected);
  EXPECT_EQ(groups.kept.count("transformer.h.0.attn.c_attn.bias"), 1u);
}

}  // namespace
}  // namespace gcrun::experiments
