// The Fashion-MNIST task: synthetic and real (hand-written IDX) data, batches, evaluation, errors.
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tasks/fashion_mnist.h"
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

std::unique_ptr<Task> makeTask(const TaskOptions& options, int64_t batch_size, uint64_t seed = 42) {
  return taskRegistry().at(options.name).factory.make(TaskContext{options, batch_size, seed, c10::Device("cpu")});
}

TaskOptions syntheticOptions() {
  TaskOptions options;
  options.synthetic = true;
  return options;
}

TEST(FashionMnist, RegistryKnowsItAndRejectsUnknownTasks) {
  EXPECT_TRUE(taskRegistry().contains("fashion-mnist"));
  expectMessageHas(userErrorOf([] { taskRegistry().at("imagenet"); }), {"unknown task 'imagenet'", "fashion-mnist"});
}

TEST(FashionMnist, SyntheticTaskTrainsAndEvaluates) {
  TaskOptions options = syntheticOptions();
  auto task = makeTask(options, 64);
  EXPECT_TRUE(task->synthetic());
  EXPECT_EQ(task->batchesPerEpoch({0, 2}), 468);
  auto stream = task->trainBatches({1, 2}, 0);
  std::optional<Batch> batch = stream->next();
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->inputs.sizes(), (std::vector<int64_t>{64, 1, 28, 28}));
  EXPECT_EQ(batch->targets.scalar_type(), at::kLong);
  EXPECT_GE(batch->inputs.min().item<double>(), -0.2860 / 0.3530 - 1e-5);
  EXPECT_LE(batch->inputs.max().item<double>(), (1 - 0.2860) / 0.3530 + 1e-5);
  MetricSums metrics;
  at::Tensor loss = task->trainLoss(*batch, metrics);
  EXPECT_EQ(loss.dim(), 0);
  EXPECT_TRUE(std::isfinite(loss.item<double>()));
  loss.backward();
  EXPECT_TRUE(task->model().named_parameters()["conv1.weight"].grad().defined());
  EXPECT_EQ(metrics.weight, 64);
  EXPECT_NEAR(metrics.sums["cross_entropy"], 64 * loss.item<double>(), 1e-3);
  EXPECT_GE(metrics.sums["accuracy"], 0);
  EXPECT_LE(metrics.sums["accuracy"], 64);
  int64_t batches = 1;
  while (stream->next()) ++batches;
  EXPECT_EQ(batches, 468);

  // A small synthetic test split: its accuracy means nothing, and smoke runs evaluate it quickly.
  MetricSums total = task->evaluate({0, 2}, "test", {});
  EXPECT_EQ(total.weight, 500);
  total.merge(task->evaluate({1, 2}, "test", {}));
  EXPECT_EQ(total.weight, 1000);
  auto means = total.means();
  EXPECT_GT(means["cross_entropy"], 0);
  EXPECT_GE(means["accuracy"], 0);
  EXPECT_LE(means["accuracy"], 1);
}

TEST(FashionMnist, SyntheticDataAndWeightsFollowTheSeed) {
  TaskOptions options = syntheticOptions();
  std::vector<std::unique_ptr<Task>> tasks(2);
  std::thread other([&] { tasks[1] = makeTask(options, 32, 7); });
  tasks[0] = makeTask(options, 32, 7);
  other.join();
  auto different = makeTask(options, 32, 8);
  EXPECT_TRUE(sameParameters(tasks[0]->model(), tasks[1]->model()));
  EXPECT_FALSE(sameParameters(tasks[0]->model(), different->model()));
  at::Tensor a = tasks[0]->trainBatches({0, 1}, 2)->next()->inputs;
  EXPECT_TRUE(torch::equal(a, tasks[1]->trainBatches({0, 1}, 2)->next()->inputs));
  EXPECT_FALSE(torch::equal(a, different->trainBatches({0, 1}, 2)->next()->inputs));
}

// A Fashion-MNIST-shaped data dir: pixel p of image i is (i * 31 + p) % 256, label i % 10.
void writeFashionDir(const TempDir& dir, uint32_t train, uint32_t test) {
  for (auto [prefix, count] : {std::make_pair("train", train), std::make_pair("t10k", test)}) {
    Bytes pixels(count * 28 * 28);
    Bytes labels(count);
    for (uint32_t i = 0; i < count; ++i) {
      labels[i] = static_cast<uint8_t>(i % 10);
      for (uint32_t p = 0; p < 28 * 28; ++p) pixels[i * 784 + p] = static_cast<uint8_t>(i * 31 + p);
    }
    writeGz(dir.file(std::string(prefix) + "-images-idx3-ubyte.gz"), idxFile(0x803, {count, 28, 28}, pixels));
    writeGz(dir.file(std::string(prefix) + "-labels-idx1-ubyte.gz"), idxFile(0x801, {count}, labels));
  }
}

TEST(FashionMnist, BatchesAreTheSampledNormalisedImages) {
  TempDir dir;
  writeFashionDir(dir, 10, 4);
  TaskOptions options;
  options.data_dir = dir.path().string();
  auto task = makeTask(options, 2);
  EXPECT_FALSE(task->synthetic());
  EXPECT_EQ(task->batchesPerEpoch({1, 2}), 2);
  const at::Tensor indices = DistributedSampler(10, {1, 2}).epochIndices(3);
  auto stream = task->trainBatches({1, 2}, 3);
  for (int64_t b = 0; b < 2; ++b) {
    std::optional<Batch> batch = stream->next();
    ASSERT_TRUE(batch);
    for (int64_t k = 0; k < 2; ++k) {
      const int64_t sample = indices[2 * b + k].item<int64_t>();
      EXPECT_EQ(batch->targets[k].item<int64_t>(), sample % 10);
      at::Tensor expected =
          (torch::arange(784).add(sample * 31).remainder(256).to(torch::kFloat) / 255 - 0.2860) / 0.3530;
      EXPECT_TRUE(torch::allclose(batch->inputs[k].flatten(), expected, 1e-5, 1e-6));
    }
  }
  EXPECT_FALSE(stream->next());
}

TEST(FashionMnist, EvaluateSumsCrossEntropyOverTheShard) {
  TempDir dir;
  writeFashionDir(dir, 10, 5);
  TaskOptions options;
  options.data_dir = dir.path().string();
  options.test_batch_size = 2;
  auto task = makeTask(options, 2);
  MetricSums shard = task->evaluate({0, 2}, "test", {});  // samples 0, 2, 4
  EXPECT_EQ(shard.weight, 3);
  torch::NoGradGuard no_grad;
  task->model().eval();
  at::Tensor images = torch::stack({torch::arange(784), torch::arange(784).add(62), torch::arange(784).add(124)});
  images = ((images.remainder(256).to(torch::kFloat) / 255 - 0.2860) / 0.3530).view({3, 1, 28, 28});
  at::Tensor logits = dynamic_cast<models::Classifier&>(task->model()).forward(images);
  at::Tensor targets = torch::tensor({0, 2, 4}, torch::kLong);
  const double expected = torch::nn::functional::cross_entropy(
                              logits, targets, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                              .item<double>();
  EXPECT_NEAR(shard.sums["cross_entropy"], expected, 1e-4);
  EXPECT_EQ(shard.sums["accuracy"], logits.argmax(1).eq(targets).sum().item<double>());
}

// On the CPU the evaluation runs in batches of 32, whatever task.test_batch_size says: the same
// accuracy as one forward pass over the shard, and the loss up to float rounding.
TEST(FashionMnist, ChunkedEvaluationMatchesOneBatch) {
  TempDir dir;
  writeFashionDir(dir, 10, 200);
  TaskOptions options;
  options.data_dir = dir.path().string();
  options.test_batch_size = 1000;
  EXPECT_EQ(evaluationChunk(options.test_batch_size, c10::Device("cpu")), 32);
  EXPECT_EQ(evaluationChunk(16, c10::Device("cpu")), 16);
  auto task = makeTask(options, 2);
  const MetricSums chunked = task->evaluate({1, 2}, "test", {});  // samples 1, 3, ..., 199: 4 batches
  ASSERT_EQ(chunked.weight, 100);
  torch::NoGradGuard no_grad;
  task->model().eval();
  const at::Tensor samples = torch::arange(1, 200, 2, torch::kLong);
  const at::Tensor pixels = (torch::arange(784).unsqueeze(0) + samples.unsqueeze(1) * 31).remainder(256);
  const at::Tensor images = (pixels.to(torch::kFloat) / 255 - 0.2860) / 0.3530;
  const at::Tensor logits = dynamic_cast<models::Classifier&>(task->model()).forward(images.view({100, 1, 28, 28}));
  const at::Tensor targets = samples.remainder(10);
  const double loss =
      torch::nn::functional::cross_entropy(logits.to(torch::kDouble), targets,
                                           torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
          .item<double>();
  EXPECT_NEAR(chunked.sums.at("cross_entropy"), loss, 1e-5 * std::abs(loss));
  EXPECT_EQ(chunked.sums.at("accuracy"), logits.argmax(1).eq(targets).sum().item<double>());
}

TEST(FashionMnist, EvaluationTakesTheSplitsFirstMaxSamplesAndStopsWhenAsked) {
  TempDir dir;
  writeFashionDir(dir, 10, 200);
  TaskOptions options;
  options.data_dir = dir.path().string();
  auto task = makeTask(options, 2);
  EXPECT_EQ(task->evaluate({0, 2}, "test", {101, {}}).weight, 51);  // samples 0, 2, ..., 100
  EXPECT_EQ(task->evaluate({1, 2}, "test", {101, {}}).weight, 50);
  EXPECT_EQ(task->evaluate({1, 2}, "test", {1000, {}}).weight, 100);
  int polls = 0;
  const MetricSums stopped = task->evaluate({0, 1}, "test", {0, [&] { return ++polls > 1; }});
  EXPECT_EQ(stopped.weight, 32) << "one batch, then the stop request";
}

// Issue 13: task.synthetic_samples sets the synthetic training split, and a fifth of it the test's.
TEST(FashionMnist, SyntheticSamplesSizeTheSyntheticData) {
  TaskOptions options = syntheticOptions();
  options.synthetic_samples = 640;
  auto task = makeTask(options, 64);
  EXPECT_EQ(task->batchesPerEpoch({0, 1}), 10);
  EXPECT_EQ(task->evaluate({0, 1}, "test", {}).weight, 128);
  EXPECT_EQ(makeTask(syntheticOptions(), 64)->batchesPerEpoch({0, 1}), 937) << "the default: 60,000 samples";
}

TEST(FashionMnist, BadDataOrOptionsAreUserErrors) {
  TempDir dir;
  TaskOptions options;
  options.data_dir = dir.path().string();
  expectMessageHas(userErrorOf([&] { makeTask(options, 8); }),
                   {dir.file("train-images-idx3-ubyte.gz"), "dataset-fashion-mnist", "task.data_dir"});
  writeFashionDir(dir, 10, 4);
  writeGz(dir.file("t10k-labels-idx1-ubyte.gz"), idxFile(0x801, {4}, {0, 1, 2, 11}));
  expectMessageHas(userErrorOf([&] { makeTask(options, 8); }),
                   {dir.file("t10k-labels-idx1-ubyte.gz"), "label 11", "dataset-fashion-mnist"});
  TaskOptions synthetic = syntheticOptions();
  synthetic.test_batch_size = 0;
  expectMessageHas(userErrorOf([&] { makeTask(synthetic, 8); }), {"task.test_batch_size", "0"});
  expectMessageHas(userErrorOf([&] { makeTask(syntheticOptions(), 0); }), {"training.batch_size"});
  TaskOptions architecture = syntheticOptions();
  architecture.architecture = "lenet";
  expectMessageHas(userErrorOf([&] { makeTask(architecture, 8); }), {"unknown architecture 'lenet'"});
}

TEST(FashionMnist, RealDataFromTheDebianPackage) {
  const std::string dir = kFashionMnistDefaultDir;
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << dir << " is absent (package dataset-fashion-mnist)";
  IdxDataset train = readIdxDataset(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz", 10);
  IdxDataset test = readIdxDataset(dir + "/t10k-images-idx3-ubyte.gz", dir + "/t10k-labels-idx1-ubyte.gz", 10);
  EXPECT_EQ(train.images.sizes(), (std::vector<int64_t>{60000, 28, 28}));
  EXPECT_EQ(test.images.sizes(), (std::vector<int64_t>{10000, 28, 28}));
  // Balanced classes, and the normalisation constants are the training set's statistics.
  EXPECT_TRUE(torch::equal(torch::bincount(train.labels.to(torch::kLong)), torch::full({10}, 6000, torch::kLong)));
  at::Tensor pixels = train.images.to(torch::kDouble) / 255;
  EXPECT_NEAR(pixels.mean().item<double>(), 0.2860, 5e-4);
  EXPECT_NEAR(pixels.std().item<double>(), 0.3530, 5e-4);
  auto task = makeTask(TaskOptions{}, 128);
  EXPECT_EQ(task->batchesPerEpoch({0, 1}), 468);
}

}  // namespace
}  // namespace gcrun::tasks
