#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tasks/language_model.h"
#include "tasks/models/gpt.h"
#include "tasks/sampler.h"
#include "tasks/token_files.h"
#include "tests/support/command.h"
#include "tests/support/temp_dir.h"
#include "tests/support/user_error.h"

namespace gcrun::tasks {
namespace {

using gcrun::testing::expectMessageHas;
using gcrun::testing::userErrorOf;
using models::GptModel;
using models::GptShape;
using testing::TempDir;

const c10::Device kCpu(c10::kCPU);

int64_t countParameters(torch::nn::Module& model) {
  int64_t count = 0;
  for (const auto& p : model.parameters()) count += p.numel();
  return count;
}

at::Tensor parameter(torch::nn::Module& model, const std::string& name) { return model.named_parameters()[name]; }

GptShape smallShape() { return GptShape{65, 16, 2, 2, 32, true, 0.0}; }

// ---------------------------------------------------------------------------------------------
// The model.

TEST(GptModel, ParameterCountsFollowTheClosedFormWithAndWithoutBias) {
  // V d + T d + L (12 d^2 + 13 d) + 2 d, and V d + T d + L (12 d^2 + 2 d) + d, worked out by hand.
  const struct {
    GptShape shape;
    int64_t expected;
  } cases[] = {{{65, 16, 2, 2, 32, true, 0.0}, 28064},
               {{65, 16, 2, 2, 32, false, 0.0}, 27328},
               {{100, 8, 3, 4, 48, true, 0.0}, 90096},
               {{100, 8, 3, 4, 48, false, 0.0}, 88464}};
  for (const auto& c : cases) {
    GptModel model(c.shape, 1);
    EXPECT_EQ(GptModel::size(c.shape).parameterCount(), c.expected);
    EXPECT_EQ(countParameters(model), c.expected);
  }
}

TEST(GptModel, ParametersHaveNanoGptsNamesInItsOrder) {
  GptShape shape = smallShape();
  shape.layers = 1;
  const std::vector<std::string> with_bias = {"transformer.wte.weight",
                                              "transformer.wpe.weight",
                                              "transformer.h.0.ln_1.weight",
                                              "transformer.h.0.ln_1.bias",
                                              "transformer.h.0.attn.c_attn.weight",
                                              "transformer.h.0.attn.c_attn.bias",
                                              "transformer.h.0.attn.c_proj.weight",
                                              "transformer.h.0.attn.c_proj.bias",
                                              "transformer.h.0.ln_2.weight",
                                              "transformer.h.0.ln_2.bias",
                                              "transformer.h.0.mlp.c_fc.weight",
                                              "transformer.h.0.mlp.c_fc.bias",
                                              "transformer.h.0.mlp.c_proj.weight",
                                              "transformer.h.0.mlp.c_proj.bias",
                                              "transformer.ln_f.weight",
                                              "transformer.ln_f.bias"};
  for (bool bias : {true, false}) {
    shape.bias = bias;
    GptModel model(shape, 1);
    std::vector<std::string> names;
    for (const auto& item : model.named_parameters()) names.push_back(item.key());
    std::vector<std::string> expected;
    for (const auto& name : with_bias) {
      if (bias || name.find(".bias") == std::string::npos) expected.push_back(name);
    }
    EXPECT_EQ(names, expected);
  }
  GptModel model(smallShape(), 1);
  EXPECT_EQ(parameter(model, "transformer.h.1.attn.c_attn.weight").sizes(), (std::vector<int64_t>{96, 32}));
  EXPECT_EQ(parameter(model, "transformer.h.1.mlp.c_proj.weight").sizes(), (std::vector<int64_t>{32, 128}));
  EXPECT_EQ(parameter(model, "transformer.wpe.weight").sizes(), (std::vector<int64_t>{16, 32}));
}

TEST(GptModel, InitDrawsEachWeightInParameterOrderFromTheSeed) {
  GptShape shape{65, 32, 2, 2, 64, true, 0.0};
  GptModel model(shape, 7);
  // The first two draws of a generator seeded 7 are wte then wpe.
  at::Generator generator = at::detail::createCPUGenerator(7);
  const at::Tensor wte = at::empty({65, 64}).normal_(0, 0.02, generator);
  const at::Tensor wpe = at::empty({32, 64}).normal_(0, 0.02, generator);
  EXPECT_TRUE(parameter(model, "transformer.wte.weight").equal(wte));
  EXPECT_TRUE(parameter(model, "transformer.wpe.weight").equal(wpe));
  for (const auto& item : model.named_parameters()) {
    const std::string& name = item.key();
    const at::Tensor p = item.value().to(at::kDouble);
    if (name.find(".bias") != std::string::npos) {
      EXPECT_EQ(p.abs().max().item<double>(), 0) << name;
    } else if (name.find(".ln_") != std::string::npos) {
      EXPECT_TRUE(p.eq(1).all().item<bool>()) << name;
    } else {
      // c_proj: 0.02 / sqrt(2 L) = 0.01; the std of n normal draws is off by about 1/sqrt(2n) < 1.2%.
      const double expected = name.find("c_proj") != std::string::npos ? 0.01 : 0.02;
      EXPECT_NEAR(p.std().item<double>(), expected, 0.06 * expected) << name;
      EXPECT_NEAR(p.mean().item<double>(), 0, 4 * expected / std::sqrt(static_cast<double>(p.numel()))) << name;
    }
  }
  GptModel same(shape, 7), other(shape, 8);
  for (const auto& item : model.named_parameters()) {
    EXPECT_TRUE(item.value().equal(parameter(same, item.key()))) << item.key();
  }
  EXPECT_FALSE(
      parameter(model, "transformer.h.1.mlp.c_fc.weight").equal(parameter(other, "transformer.h.1.mlp.c_fc.weight")));
}

TEST(GptModel, LogitsAtAPositionDependOnlyOnTokensUpToIt) {
  GptModel model(smallShape(), 3);
  model.eval();
  torch::NoGradGuard no_grad;
  at::Generator generator = at::detail::createCPUGenerator(11);
  const at::Tensor idx = at::randint(65, {2, 16}, generator, at::TensorOptions().dtype(at::kLong));
  const at::Tensor logits = model.forward(idx);
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{2, 16, 65}));
  for (int64_t j : {0, 5, 15}) {
    at::Tensor changed = idx.clone();
    changed.select(1, j).add_(1).remainder_(65);
    const at::Tensor other = model.forward(changed);
    EXPECT_TRUE(at::allclose(other.narrow(1, 0, j), logits.narrow(1, 0, j), 0, 1e-6)) << j;
    EXPECT_FALSE(at::allclose(other.narrow(1, j, 1), logits.narrow(1, j, 1), 0, 1e-6)) << j;
  }
  // A shorter input uses the first t positions and the mask's top-left corner.
  EXPECT_TRUE(at::allclose(model.forward(idx.narrow(1, 0, 5)), logits.narrow(1, 0, 5), 0, 1e-5));
}

TEST(GptModel, LossAtInitIsNearLogV) {
  GptModel model({65, 16, 2, 2, 64, true, 0.0}, 5);
  at::Generator generator = at::detail::createCPUGenerator(12);
  const auto longs = at::TensorOptions().dtype(at::kLong);
  const at::Tensor idx = at::randint(65, {8, 16}, generator, longs);
  const at::Tensor targets = at::randint(65, {8, 16}, generator, longs);
  EXPECT_NEAR(model.loss(model.forward(idx), targets).item<double>(), std::log(65.0), 0.05);
}

TEST(GptModel, DropoutMasksRepeatFromTheSeedAndAreOffInEval) {
  GptShape shape = smallShape();
  shape.dropout = 0.2;
  GptModel model(shape, 3);
  const at::Tensor idx = at::arange(32, at::TensorOptions().dtype(at::kLong)).remainder(65).view({2, 16});
  model.train();
  model.seedRandomness(99);
  const at::Tensor first = model.forward(idx);
  const at::Tensor second = model.forward(idx);
  model.seedRandomness(99);
  EXPECT_TRUE(model.forward(idx).equal(first));
  EXPECT_FALSE(second.equal(first));
  model.eval();
  EXPECT_TRUE(model.forward(idx).equal(model.forward(idx)));
}

// ---------------------------------------------------------------------------------------------
// Data: characters, windows, the epoch's permutation.

TEST(LanguageModelData, CharIdsAreRanksOfTheBytesOfAllFiles) {
  const auto bytes = [](const std::string& text) {
    return at::tensor(std::vector<uint8_t>(text.begin(), text.end()), at::kByte);
  };
  std::array<at::Tensor, 3> ids = {bytes("ba"), bytes("c"), bytes(std::string("a\xff"))};
  EXPECT_EQ(encodeCharacters(ids), (std::vector<unsigned char>{'a', 'b', 'c', 0xff}));
  EXPECT_TRUE(ids[0].equal(at::tensor(std::vector<uint8_t>{1, 0})));
  EXPECT_TRUE(ids[1].equal(at::tensor(std::vector<uint8_t>{2})));
  EXPECT_TRUE(ids[2].equal(at::tensor(std::vector<uint8_t>{0, 3})));
}

TEST(LanguageModelData, WindowTargetsAreTheInputsShiftedByOne) {
  // Ids held in a small type come out as int64, as the model takes them.
  for (const auto type : {at::kLong, at::kByte, at::kShort, at::kInt}) {
    const at::Tensor ids = at::arange(100, at::TensorOptions().dtype(type));
    const Batch batch = windowBatch(ids, at::tensor(std::vector<int64_t>{2, 0}), 4);
    EXPECT_TRUE(batch.inputs.equal(at::tensor(std::vector<int64_t>{8, 9, 10, 11, 0, 1, 2, 3}).view({2, 4})));
    EXPECT_TRUE(batch.targets.equal(batch.inputs + 1));
  }
}

TEST(LanguageModelData, EachEpochDealsAPermutationOfTheWindowsToTheRanks) {
  const uint64_t seed = 42;
  at::Generator generator = at::detail::createCPUGenerator(streamSeed(seed, -1, 3));
  const at::Tensor permutation = at::randperm(10, generator, at::TensorOptions().dtype(at::kLong));
  std::set<int64_t> seen;
  for (int rank = 0; rank < 3; ++rank) {
    const at::Tensor mine = epochWindows(10, seed, 3, {rank, 3});
    ASSERT_EQ(mine.size(0), 3);  // 10 / 3: the tenth is dropped
    for (int64_t i = 0; i < 3; ++i) {
      EXPECT_EQ(mine[i].item<int64_t>(), permutation[rank + 3 * i].item<int64_t>());
      seen.insert(mine[i].item<int64_t>());
    }
    EXPECT_TRUE(mine.equal(epochWindows(10, seed, 3, {rank, 3})));
  }
  EXPECT_EQ(seen.size(), 9u);
  EXPECT_FALSE(epochWindows(10, seed, 4, {0, 1}).equal(epochWindows(10, seed, 3, {0, 1})));
}

// ---------------------------------------------------------------------------------------------
// The task.

struct CharFolder {
  TempDir dir;
  std::string train, valid, test;
  CharFolder() {
    for (int i = 0; i < 97; ++i) train += static_cast<char>('a' + (i * 7) % 13);
    valid = "the valid text.";  // 15 bytes
    test = "and test text, a bit longer.";
    std::ofstream(dir.file("wiki.train.tokens"), std::ios::binary) << train;
    std::ofstream(dir.file("wiki.valid.tokens"), std::ios::binary) << valid;
    std::ofstream(dir.file("wiki.test.tokens"), std::ios::binary) << test;
  }
};

TaskOptions gptOptions(const std::string& data_dir, SettingValues settings) {
  TaskOptions options;
  options.name = "language-model";
  options.architecture = "gpt";
  options.data_dir = data_dir;
  options.settings = {{"context", int64_t{8}}, {"layers", int64_t{1}}, {"heads", int64_t{2}}, {"width", int64_t{16}}};
  for (const auto& [key, value] : settings) options.settings[key] = value;
  return options;
}

TEST(LanguageModelTask, RanksTakeEveryTrainingWindowOnceInDeterministicBatches) {
  CharFolder folder;
  auto task = makeLanguageModelTask({gptOptions(folder.dir.path().string(), {}), 3, 5, kCpu});
  const TokenCorpus chars = readTokenCorpus(folder.dir.path().string(), TokenLevel::kChar);
  const at::Tensor train = chars.ids[0];
  // 97 bytes: K = 96 / 8 = 12 windows, 6 per rank of 2, 2 batches of 3.
  EXPECT_EQ(task->batchesPerEpoch({0, 2}), 2);
  std::set<int64_t> starts;
  for (int rank = 0; rank < 2; ++rank) {
    const at::Tensor windows = epochWindows(12, 5, 1, {rank, 2});
    auto stream = task->trainBatches({rank, 2}, 1);
    auto again = task->trainBatches({rank, 2}, 1);
    for (int64_t b = 0; b < 2; ++b) {
      const auto batch = stream->next();
      ASSERT_TRUE(batch);
      const Batch expected = windowBatch(train, windows.narrow(0, 3 * b, 3), 8);
      EXPECT_TRUE(batch->inputs.equal(expected.inputs));
      EXPECT_TRUE(batch->targets.equal(expected.targets));
      EXPECT_TRUE(again->next()->inputs.equal(batch->inputs));
      for (int64_t i = 0; i < 3; ++i) starts.insert(windows[3 * b + i].item<int64_t>());
    }
    EXPECT_FALSE(stream->next());
  }
  EXPECT_EQ(starts.size(), 12u);
  MetricSums sums;
  task->trainLoss(*task->trainBatches({0, 1}, 0)->next(), sums).backward();
  EXPECT_EQ(sums.weight, 3 * 8);
  EXPECT_EQ(parameter(task->model(), "transformer.wte.weight").size(0), chars.vocabulary);
  EXPECT_NEAR(sums.sums.at("cross_entropy") / sums.weight, std::log(static_cast<double>(chars.vocabulary)), 0.1);
}

TEST(LanguageModelTask, EvaluationSumsOverShardsAddUpToOneShards) {
  TaskOptions options = gptOptions("", {});
  options.synthetic = true;
  options.synthetic_samples = 4000;  // held-out splits of 400 tokens: 49 windows of 8
  options.test_batch_size = 5;
  auto task = makeLanguageModelTask({options, 4, 9, kCpu});
  for (const std::string split : {"validation", "test"}) {
    const MetricSums whole = task->evaluate({0, 1}, split, {});
    MetricSums parts = task->evaluate({0, 2}, split, {});
    parts.merge(task->evaluate({1, 2}, split, {}));
    EXPECT_EQ(whole.weight, 49 * 8);
    EXPECT_EQ(parts.weight, whole.weight);
    const double ce = whole.sums.at("cross_entropy");
    EXPECT_NEAR(parts.sums.at("cross_entropy"), ce, 1e-6 * ce);
    EXPECT_NEAR(ce / whole.weight, std::log(65.0), 0.1);
  }
  EXPECT_EQ(task->evaluate({0, 1}, "test", {3 * 8 + 7, {}}).weight, 3 * 8);
  // 3 windows over 4 ranks: rank 3 has none and still names the metric (reduceMetrics packs every
  // rank's metrics in order; a rank without it would leave the others' all-reduce waiting).
  const MetricSums none = task->evaluate({3, 4}, "test", {3 * 8, {}});
  EXPECT_EQ(none.weight, 0);
  EXPECT_EQ(none.sums.count("cross_entropy"), 1u);
  EXPECT_EQ(task->evaluationSplits(), (std::vector<std::string>{"validation", "test"}));
}

TEST(LanguageModelTask, FinalizeAddsPerplexityAndBitsPerCharacterAtCharLevel) {
  TaskOptions options = gptOptions("", {});
  options.synthetic = true;
  options.synthetic_samples = 1000;
  auto chars = makeLanguageModelTask({options, 4, 9, kCpu});
  const auto means = chars->finalize({{"cross_entropy", 1.5}});
  EXPECT_DOUBLE_EQ(means.at("perplexity"), std::exp(1.5));
  EXPECT_DOUBLE_EQ(means.at("bits_per_character"), 1.5 / std::log(2.0));
  options.settings["level"] = std::string("word");
  auto words = makeLanguageModelTask({options, 4, 9, kCpu});
  EXPECT_EQ(words->finalize({{"cross_entropy", 1.5}}).count("bits_per_character"), 0u);
  EXPECT_EQ(parameter(words->model(), "transformer.wte.weight").size(0), 10000);
  EXPECT_EQ(parameter(chars->model(), "transformer.wte.weight").size(0), 65);
  for (const auto& name : chars->embeddingParameters()) {
    EXPECT_TRUE(chars->model().named_parameters().contains(name)) << name;
  }
  EXPECT_EQ(chars->embeddingParameters().size(), 2u);
}

TEST(LanguageModelTask, WordLevelUsesTheWikiTextVocabulary) {
  TempDir dir;
  std::ofstream(dir.file("wiki.train.tokens")) << " the cat sat on the mat . \n the dog sat . \n";
  std::ofstream(dir.file("wiki.valid.tokens")) << " the dog sat on a mat . \n";
  std::ofstream(dir.file("wiki.test.tokens")) << " a zebra sat on the cat . \n";
  auto task = makeLanguageModelTask(
      {gptOptions(dir.path().string(), {{"level", std::string("word")}, {"context", int64_t{4}}}), 2, 1, kCpu});
  // <unk>, <pad>, the, sat, ., <eos>, cat, dog, mat, on.
  EXPECT_EQ(parameter(task->model(), "transformer.wte.weight").size(0), 10);
  // 13 training tokens: K = 3 windows of 4, one batch of 2.
  EXPECT_EQ(task->batchesPerEpoch({0, 1}), 1);
  EXPECT_EQ(task->evaluate({0, 1}, "test", {}).weight, 4);  // 8 tokens: one window
}

TEST(LanguageModelTask, DropoutGeneratorIsSavedAndRestored) {
  TaskOptions options = gptOptions("", {{"dropout", 0.3}});
  options.synthetic = true;
  options.synthetic_samples = 1000;
  auto task = makeLanguageModelTask({options, 2, 4, kCpu});
  auto stream = task->trainBatches({0, 1}, 0);
  const Batch batch = *stream->next();
  Task::State state;
  task->saveState(state);
  ASSERT_TRUE(state.count("dropout_generator"));
  MetricSums sums;
  const double first = task->trainLoss(batch, sums).item<double>();
  EXPECT_NE(task->trainLoss(batch, sums).item<double>(), first);
  task->loadState(state);
  EXPECT_EQ(task->trainLoss(batch, sums).item<double>(), first);
  EXPECT_THROW(task->loadState({}), std::invalid_argument);

  options.settings["dropout"] = 0.0;
  auto plain = makeLanguageModelTask({options, 2, 4, kCpu});
  plain->trainBatches({0, 1}, 0);
  Task::State none;
  plain->saveState(none);
  EXPECT_TRUE(none.empty());
}

// The spec is the contract with a PyTorch twin: gpt_peer.py follows it alone (its synthetic ids,
// permutation, init order, forward ops and dropout draws) and must agree to the last bit.
TEST(LanguageModelTask, FirstTrainingStepMatchesThePyTorchPeerBitForBit) {
  if (testing::runCommand("/usr/bin/python3 -c 'import torch'").exit_code != 0) {
    GTEST_SKIP() << "Debian's python3-torch is not installed (apt-get install python3-torch)";
  }
  for (const auto& [bias, dropout] : std::vector<std::pair<bool, double>>{{true, 0.0}, {false, 0.1}}) {
    TaskOptions options = gptOptions("", {{"context", int64_t{16}},
                                          {"layers", int64_t{2}},
                                          {"width", int64_t{32}},
                                          {"bias", bias},
                                          {"dropout", dropout}});
    options.synthetic = true;
    options.synthetic_samples = 3000;
    auto task = makeLanguageModelTask({options, 4, 7, kCpu});
    const Batch batch = *task->trainBatches({0, 1}, 0)->next();
    MetricSums sums;
    std::map<std::string, double> mine = {{"inputs", batch.inputs.to(at::kDouble).sum().item<double>()}};
    mine["loss"] = [&] {
      at::Tensor loss = task->trainLoss(batch, sums);
      loss.backward();
      return loss.item<double>();
    }();
    double parameters = 0;
    for (const auto& item : task->model().named_parameters()) {
      parameters += item.value().detach().to(at::kDouble).sum().item<double>();
      if (item.key() == "transformer.wte.weight" || item.key() == "transformer.h.0.attn.c_attn.weight") {
        mine["grad:" + item.key()] = item.value().grad().to(at::kDouble).sum().item<double>();
      }
    }
    mine["parameters"] = parameters;
    const auto peer = testing::runCommand(std::string("/usr/bin/python3 ") + GCRUN_GPT_PEER + " 7 3000 16 2 2 32 " +
                                          (bias ? "1 " : "0 ") + (dropout > 0 ? "0.1" : "0") + " 4");
    ASSERT_EQ(peer.exit_code, 0) << peer.output;
    std::istringstream lines(peer.output);
    size_t compared = 0;
    for (std::string name, value; lines >> name >> value; ++compared) {
      ASSERT_TRUE(mine.count(name)) << name;
      EXPECT_EQ(mine.at(name), std::stod(value)) << name << " bias " << bias << " dropout " << dropout;
    }
    EXPECT_EQ(compared, mine.size()) << peer.output;
  }
}

// ---------------------------------------------------------------------------------------------
// Bad input: one line naming the key or file and what is accepted.

TEST(LanguageModelTask, BadSettingsNameTheKeyAndWhatIsAccepted) {
  CharFolder folder;
  const std::string dir = folder.dir.path().string();
  const auto refusal = [&](SettingValues settings, const std::string& architecture = "gpt") {
    TaskOptions options = gptOptions(dir, std::move(settings));
    options.architecture = architecture;
    return userErrorOf([&] { makeLanguageModelTask({options, 2, 1, kCpu}); });
  };
  expectMessageHas(refusal({{"heads", int64_t{3}}}), {"task.heads", "3", "task.width 16", "divisor"});
  expectMessageHas(refusal({{"level", std::string("byte")}}), {"task.level", "byte", "char, word"});
  expectMessageHas(refusal({}, "lstm"), {"task.architecture", "lstm", "gpt"});
  for (const char* key : {"layers", "heads", "width", "context"}) {
    expectMessageHas(refusal({{key, int64_t{0}}}), {std::string("task.") + key, "at least 1", "got 0"});
  }
  expectMessageHas(refusal({{"dropout", 1.0}}), {"task.dropout", "[0, 1)", "got 1"});
  expectMessageHas(refusal({{"dropout", -0.5}}), {"task.dropout", "[0, 1)", "-0.5"});
  // The validation split has 15 bytes: a context of 15 needs 16.
  expectMessageHas(refusal({{"context", int64_t{15}}}),
                   {"task.context", "15", "wiki.valid.tokens", "15 tokens", "at most 14"});
  EXPECT_NO_THROW(makeLanguageModelTask({gptOptions(dir, {{"context", int64_t{14}}}), 2, 1, kCpu}));
}

TEST(LanguageModelTask, MissingOrEmptyTokenFilesAreNamed) {
  for (const std::string level : {"char", "word"}) {
    CharFolder missing;
    std::filesystem::remove(missing.dir.file("wiki.test.tokens"));
    const auto options = gptOptions(missing.dir.path().string(), {{"level", level}});
    expectMessageHas(userErrorOf([&] {
                       makeLanguageModelTask({options, 2, 1, kCpu});
                     }),
                     {"wiki.test.tokens", "no such file", "task.data_dir"});
  }
  CharFolder folder;  // a directory, or a FIFO that would block a plain read, is refused unread
  std::filesystem::remove(folder.dir.file("wiki.valid.tokens"));
  std::filesystem::create_directory(folder.dir.file("wiki.valid.tokens"));
  const auto word_options = gptOptions(folder.dir.path().string(), {{"level", std::string("word")}});
  expectMessageHas(userErrorOf([&] {
                     makeLanguageModelTask({word_options, 2, 1, kCpu});
                   }),
                   {"wiki.valid.tokens", "is a directory"});
  CharFolder empty;
  std::ofstream(empty.dir.file("wiki.valid.tokens"), std::ios::trunc).flush();
  const auto options = gptOptions(empty.dir.path().string(), {});
  expectMessageHas(userErrorOf([&] {
                     makeLanguageModelTask({options, 2, 1, kCpu});
                   }),
                   {"wiki.valid.tokens", "is empty", "task.context + 1"});
  TempDir nothing;
  expectMessageHas(userErrorOf([&] {
                     makeLanguageModelTask({gptOptions(nothing.path().string(), {}), 2, 1, kCpu});
                   }),
                   {"wiki.train.tokens", "no such file"});
}

}  // namespace
}  // namespace gcrun::tasks
