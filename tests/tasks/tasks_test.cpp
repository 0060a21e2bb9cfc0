#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "hyperparams/base/errors.h"
#include "tasks/idx_reader.h"
#include "tasks/models/models.h"
#include "tasks/sampler.h"
#include "tasks/task.h"
#include "tests/support/task_fixtures.h"
#include "tests/support/temp_dir.h"
#include "tests/support/user_error.h"

namespace gcrun::tasks {
namespace {

using gcrun::testing::expectMessageHas;
using gcrun::testing::userErrorOf;

using testing::TempDir;

Bytes iota(size_t size, uint8_t step = 1) {
  Bytes out(size);
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<uint8_t>(i * step);
  return out;
}

TEST(IdxReader, ReadsGzippedImagesAndLabelsExactly) {
  TempDir dir;
  writeGz(dir.file("images.gz"), idxFile(0x803, {3, 2, 4}, iota(24, 7)));
  writeGz(dir.file("labels.gz"), idxFile(0x801, {3}, {0, 9, 4}));
  IdxDataset data = readIdxDataset(dir.file("images.gz"), dir.file("labels.gz"), 10);
  ASSERT_EQ(data.images.sizes(), (std::vector<int64_t>{3, 2, 4}));
  EXPECT_EQ(data.images.scalar_type(), at::kByte);
  for (int64_t i = 0; i < 24; ++i) {
    EXPECT_EQ(data.images.flatten()[i].item<int>(), (i * 7) % 256) << i;
  }
  EXPECT_TRUE(torch::equal(data.labels, torch::tensor({0, 9, 4}, torch::kByte)));
}

TEST(IdxReader, ReadsPlainFilesThroughTheSameApi) {
  TempDir dir;
  Bytes bytes = idxFile(0x801, {4}, {1, 2, 3, 1});
  std::FILE* file = std::fopen(dir.file("labels").c_str(), "wb");
  ASSERT_NE(file, nullptr);
  std::fwrite(bytes.data(), 1, bytes.size(), file);
  std::fclose(file);
  EXPECT_TRUE(torch::equal(readIdxLabels(dir.file("labels"), 4), torch::tensor({1, 2, 3, 1}, torch::kByte)));
}

TEST(IdxReader, TruncatedDataGivesExpectedAndActualSizes) {
  TempDir dir;
  writeGz(dir.file("images.gz"), idxFile(0x803, {3, 2, 4}, iota(23)));
  expectMessageHas(userErrorOf([&] { readIdxImages(dir.file("images.gz")); }),
                   {dir.file("images.gz"), "truncated", "24", "got 23"});
}

TEST(IdxReader, CutGzipStreamIsReported) {
  TempDir dir;
  Bytes noise(4000);
  for (size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  writeGz(dir.file("full.gz"), idxFile(0x803, {10, 20, 20}, noise));
  const auto size = std::filesystem::file_size(dir.file("full.gz"));
  std::filesystem::copy_file(dir.file("full.gz"), dir.file("cut.gz"));
  std::filesystem::resize_file(dir.file("cut.gz"), size / 2);
  expectMessageHas(userErrorOf([&] { readIdxImages(dir.file("cut.gz")); }), {dir.file("cut.gz"), "truncated"});
}

TEST(IdxReader, WrongMagicShowsFoundAndExpectedValues) {
  TempDir dir;
  writeGz(dir.file("labels.gz"), idxFile(0x801, {2}, {1, 2}));
  expectMessageHas(userErrorOf([&] { readIdxImages(dir.file("labels.gz")); }),
                   {dir.file("labels.gz"), "magic 0x00000801", "expected magic 0x00000803"});
  writeGz(dir.file("odd.gz"), idxFile(0x12345678, {}, {}));
  expectMessageHas(userErrorOf([&] { readIdxLabels(dir.file("odd.gz"), 10); }),
                   {dir.file("odd.gz"), "0x12345678", "0x00000801"});
}

TEST(IdxReader, RejectsBytesAfterTheDeclaredData) {
  TempDir dir;
  writeGz(dir.file("labels.gz"), idxFile(0x801, {2}, {1, 2, 3}));
  expectMessageHas(userErrorOf([&] { readIdxLabels(dir.file("labels.gz"), 10); }),
                   {dir.file("labels.gz"), "unexpected bytes after the"});
}

TEST(IdxReader, LabelCountMustMatchImageCount) {
  TempDir dir;
  writeGz(dir.file("images.gz"), idxFile(0x803, {3, 1, 1}, {1, 2, 3}));
  writeGz(dir.file("labels.gz"), idxFile(0x801, {2}, {1, 2}));
  expectMessageHas(userErrorOf([&] { readIdxDataset(dir.file("images.gz"), dir.file("labels.gz"), 10); }),
                   {dir.file("labels.gz"), dir.file("images.gz"), "2 labels", "3 images"});
}

TEST(IdxReader, LabelsOutOfRangeAreNamed) {
  TempDir dir;
  writeGz(dir.file("labels.gz"), idxFile(0x801, {3}, {0, 9, 10}));
  expectMessageHas(userErrorOf([&] { readIdxLabels(dir.file("labels.gz"), 10); }),
                   {dir.file("labels.gz"), "label 10", "sample 2", "[0, 10)"});
}

TEST(IdxReader, MissingFileIsNamed) {
  TempDir dir;
  expectMessageHas(userErrorOf([&] { readIdxImages(dir.file("absent.gz")); }), {dir.file("absent.gz"), "cannot open"});
}

// Every rank's indices, interleaved back into the padded permutation: padded[r + jW] = rank r's j-th.
std::vector<int64_t> paddedPermutation(int64_t num_samples, int world_size, int64_t epoch) {
  std::vector<int64_t> padded;
  std::vector<at::Tensor> per_rank;
  for (int rank = 0; rank < world_size; ++rank) {
    DistributedSampler sampler(num_samples, {rank, world_size});
    per_rank.push_back(sampler.epochIndices(epoch));
    EXPECT_EQ(per_rank.back().size(0), sampler.samplesPerRank());
  }
  for (int64_t j = 0; j < per_rank[0].size(0); ++j) {
    for (int rank = 0; rank < world_size; ++rank) padded.push_back(per_rank[rank][j].item<int64_t>());
  }
  return padded;
}

class SamplerCoverage : public ::testing::TestWithParam<std::pair<int64_t, int>> {};

TEST_P(SamplerCoverage, EverySampleOncePaddingRepeatsTheFirst) {
  const auto [num_samples, world_size] = GetParam();
  const std::vector<int64_t> padded = paddedPermutation(num_samples, world_size, 5);
  const int64_t per_rank = (num_samples + world_size - 1) / world_size;
  ASSERT_EQ(static_cast<int64_t>(padded.size()), per_rank * world_size);
  std::vector<int> seen(num_samples, 0);
  for (int64_t i = 0; i < num_samples; ++i) seen.at(padded[i])++;
  for (int64_t i = 0; i < num_samples; ++i) EXPECT_EQ(seen[i], 1) << "sample " << i;
  for (size_t i = num_samples; i < padded.size(); ++i) EXPECT_EQ(padded[i], padded[i % num_samples]);
}

INSTANTIATE_TEST_SUITE_P(Sizes, SamplerCoverage,
                         ::testing::Values(std::make_pair(12, 4), std::make_pair(10, 4), std::make_pair(1001, 7),
                                           std::make_pair(5, 1), std::make_pair(2, 5)));

TEST(Sampler, PermutationIsTheEpochSeededRandperm) {
  at::Generator generator = at::detail::createCPUGenerator(3);
  at::Tensor expected = at::randperm(50, generator, at::TensorOptions().dtype(at::kLong));
  EXPECT_TRUE(torch::equal(DistributedSampler(50, {0, 1}).epochIndices(3), expected));
  EXPECT_TRUE(torch::equal(DistributedSampler(50, {1, 2}).epochIndices(3), expected.slice(0, 1, 50, 2)));
}

TEST(Sampler, DeterministicPerEpochAndDifferentAcrossEpochs) {
  DistributedSampler a(1000, {1, 3});
  DistributedSampler b(1000, {1, 3});
  EXPECT_TRUE(torch::equal(a.epochIndices(7), b.epochIndices(7)));
  EXPECT_FALSE(torch::equal(a.epochIndices(7), a.epochIndices(8)));
}

TEST(Sampler, DropLastBatchCount) {
  EXPECT_EQ(DistributedSampler(60000, {0, 2}).batchCount(64), 468);  // 30000 / 64 = 468.75
  EXPECT_EQ(DistributedSampler(60000, {0, 1}).batchCount(128), 468);
  EXPECT_EQ(DistributedSampler(10, {3, 4}).batchCount(3), 1);  // 3 samples per rank
  EXPECT_EQ(DistributedSampler(10, {3, 4}).batchCount(4), 0);
}

TEST(Sampler, TestShardsAreStridedWithoutPadding) {
  EXPECT_TRUE(torch::equal(testShardIndices(10, {0, 3}), torch::tensor({0, 3, 6, 9}, torch::kLong)));
  EXPECT_TRUE(torch::equal(testShardIndices(10, {2, 3}), torch::tensor({2, 5, 8}, torch::kLong)));
  EXPECT_EQ(testShardIndices(2, {3, 4}).size(0), 0);
}

int64_t parameterCount(torch::nn::Module& model) {
  int64_t count = 0;
  for (const auto& p : model.parameters()) count += p.numel();
  return count;
}

TEST(Models, ResNet18MatchesTheReferenceParameters) {
  auto model = models::buildModel("resnet18", {3, 32, 10}, 1);
  auto named = model->named_parameters();
  EXPECT_EQ(named.size(), 62u);
  EXPECT_EQ(parameterCount(*model), 11173962);
  const std::vector<std::string> first = {"conv1.weight",          "bn1.weight",          "bn1.bias",
                                          "layer1.0.conv1.weight", "layer1.0.bn1.weight", "layer1.0.bn1.bias",
                                          "layer1.0.conv2.weight"};
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(named.keys()[i], first[i]);
  for (const char* name : {"layer2.0.shortcut.0.weight", "layer2.0.shortcut.1.weight", "layer2.0.shortcut.1.bias",
                           "layer4.1.bn2.bias", "linear.weight", "linear.bias"}) {
    EXPECT_TRUE(named.contains(name)) << name;
  }
  EXPECT_FALSE(named.contains("layer1.0.shortcut.0.weight"));
  EXPECT_EQ(named.keys().back(), "linear.bias");
}

TEST(Models, ResNet18AcceptsMnistAndCifarShapes) {
  torch::NoGradGuard no_grad;
  auto gray = models::buildModel("resnet18", {1, 28, 10}, 1);
  EXPECT_EQ(gray->forward(torch::randn({2, 1, 28, 28})).sizes(), (std::vector<int64_t>{2, 10}));
  auto color = models::buildModel("resnet18", {3, 32, 10}, 1);
  EXPECT_EQ(color->forward(torch::randn({2, 3, 32, 32})).sizes(), (std::vector<int64_t>{2, 10}));
}

TEST(Models, CnnLayersAndCount) {
  auto model = models::buildModel("cnn", {1, 28, 10}, 1);
  const int64_t expected = (32 * 1 * 9 + 32) + (64 * 32 * 9 + 64) + (64 * 7 * 7 * 128 + 128) + (128 * 10 + 10);
  EXPECT_EQ(parameterCount(*model), expected);
  EXPECT_EQ(model->named_parameters().keys(),
            (std::vector<std::string>{"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", "fc1.weight",
                                      "fc1.bias", "fc2.weight", "fc2.bias"}));
  torch::NoGradGuard no_grad;
  EXPECT_EQ(model->forward(torch::randn({4, 1, 28, 28})).sizes(), (std::vector<int64_t>{4, 10}));
}

TEST(Models, DefaultInitialisationBounds) {
  auto model = models::buildModel("resnet18", {3, 32, 10}, 5);
  auto params = model->named_parameters();
  const double conv1_bound = 1 / std::sqrt(27.0);  // fan_in 3 * 3 * 3
  EXPECT_LE(params["conv1.weight"].abs().max().item<double>(), conv1_bound + 1e-7);
  EXPECT_GE(params["conv1.weight"].abs().max().item<double>(), 0.9 * conv1_bound);
  EXPECT_TRUE(torch::equal(params["bn1.weight"], torch::ones({64})));
  EXPECT_TRUE(torch::equal(params["bn1.bias"], torch::zeros({64})));
  EXPECT_LE(params["linear.bias"].abs().max().item<double>(), 1 / std::sqrt(512.0) + 1e-7);
}

TEST(Models, SeedAloneDecidesTheWeightsEvenAcrossThreads) {
  auto reference = models::buildModel("resnet18", {3, 32, 10}, 42);
  std::vector<std::shared_ptr<models::Classifier>> built(3);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < built.size(); ++i) {
    threads.emplace_back([&, i] {
      torch::randn({1000});  // other threads using the global RNG must not matter
      built[i] = models::buildModel("resnet18", {3, 32, 10}, 42);
    });
  }
  for (auto& thread : threads) thread.join();
  for (auto& model : built) EXPECT_TRUE(sameParameters(*reference, *model));
  EXPECT_FALSE(sameParameters(*reference, *models::buildModel("resnet18", {3, 32, 10}, 43)));
}

// --- TaskSpec::check: what the launcher refuses without a model, as the task itself would ---

struct CheckedTask {
  std::string name, architecture;
};

class BuiltInTaskCheck : public ::testing::TestWithParam<CheckedTask> {};

// The refusal of `run`, or "" when it passes.
std::string refusalOf(const std::function<void()>& run) {
  try {
    run();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST_P(BuiltInTaskCheck, RefusesWhatTheBuiltTaskRefusesAndNothingElse) {
  const auto& spec = taskRegistry().at(GetParam().name).factory;
  ASSERT_TRUE(spec.check) << GetParam().name << " would be built by the launcher";
  TaskOptions options;
  options.name = GetParam().name;
  options.architecture = GetParam().architecture;
  options.synthetic = true;
  options.synthetic_samples = 2000;
  for (const int64_t batch_size : {0, 8, 4000}) {
    for (const int world_size : {1, 3, 1000}) {
      const TaskContext context{options, batch_size, 1, c10::kCPU};
      const auto built = refusalOf([&] {
        const auto task = spec.make(context);
        batchesPerEpochOf(*task, {0, world_size}, batch_size);
      });
      EXPECT_EQ(refusalOf([&] { spec.check(context, world_size); }), built)
          << GetParam().name << ", batch size " << batch_size << ", " << world_size << " workers";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tasks, BuiltInTaskCheck,
                         ::testing::Values(CheckedTask{"fashion-mnist", "cnn"}, CheckedTask{"cifar10", "resnet18"},
                                           CheckedTask{"wikitext2", "lstm"}, CheckedTask{"wikitext2", "cnn"},
                                           CheckedTask{"language-model", "gpt"}));

TEST(Models, UnknownArchitectureListsTheKnownOnes) {
  expectMessageHas(userErrorOf([] {
                     models::buildModel("vgg99", {1, 28, 10}, 1);
                   }),
                   {"unknown architecture 'vgg99'", "cnn", "resnet18"});
}

}  // namespace
}  // namespace gcrun::tasks
