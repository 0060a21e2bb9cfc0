#include "tasks/fashion_mnist.h"
#include "tasks/device_transfer.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/functional/loss.h>
#include <torch/utils.h>

#include "hyperparams/base/errors.h"
#include "tasks/data_location.h"
#include "tasks/idx_reader.h"
#include "tasks/models/models.h"
#include "tasks/sampler.h"

namespace gcrun::tasks {
namespace {

constexpr int64_t kFashionClasses = 10;
constexpr int64_t kFashionSide = 28;
constexpr int64_t kFashionSyntheticTrain = 60000;
// Synthetic accuracy means nothing: a small test split keeps the evaluation of smoke runs short.
constexpr int64_t kFashionSyntheticTest = 1000;
// Mean and standard deviation of the training pixels, scaled to [0, 1].
constexpr double kPixelMean = 0.2860;
constexpr double kPixelStd = 0.3530;

struct FashionData {
  IdxDataset train;
  IdxDataset test;
};

IdxDataset readSplit(const std::string& dir, const std::string& prefix) {
  const std::string images = dir + "/" + prefix + "-images-idx3-ubyte.gz";
  const std::string labels = dir + "/" + prefix + "-labels-idx1-ubyte.gz";
  IdxDataset split;
  try {
    split = readIdxDataset(images, labels, kFashionClasses);
  } catch (const UserError& error) {
    throw UserError(std::string(error.what()) +
                    "; Fashion-MNIST comes from the Debian package dataset-fashion-mnist (or set "
                    "task.data_dir to a directory with its four *-ubyte.gz files)");
  }
  if (split.images.size(1) != kFashionSide || split.images.size(2) != kFashionSide) {
    throw UserError(images + ": images are " + std::to_string(split.images.size(1)) + "x" +
                    std::to_string(split.images.size(2)) + ", Fashion-MNIST's are 28x28");
  }
  return split;
}

IdxDataset randomFashionSplit(int64_t samples, at::Generator& generator) {
  const auto bytes = at::TensorOptions().dtype(at::kByte);
  at::Tensor images = at::randint(0, 256, {samples, kFashionSide, kFashionSide}, generator, bytes);
  return {images, at::randint(0, kFashionClasses, {samples}, generator, bytes)};
}

// Ranks run as threads of one process share one read-only copy of the data.
std::shared_ptr<const FashionData> loadFashionData(const TaskOptions& options, uint64_t seed) {
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<const FashionData>> cache;
  const std::string dir = options.data_dir.empty() ? kFashionMnistDefaultDir : options.data_dir;
  const std::string key = dataCacheKey(options, seed, dir);
  std::lock_guard<std::mutex> lock(mutex);
  if (auto cached = cache[key].lock()) return cached;
  std::shared_ptr<const FashionData> data;
  if (options.synthetic) {
    at::Generator generator = at::detail::createCPUGenerator(seed);
    // As CIFAR-10's: task.synthetic_samples training samples and a fifth of them for the test.
    const auto sizes = syntheticSizes(options, {kFashionSyntheticTrain, kFashionSyntheticTest}, 5, 1);
    IdxDataset train = randomFashionSplit(sizes.train, generator);
    data = std::make_shared<const FashionData>(FashionData{train, randomFashionSplit(sizes.held_out, generator)});
  } else {
    data = std::make_shared<const FashionData>(FashionData{readSplit(dir, "train"), readSplit(dir, "t10k")});
  }
  cache[key] = data;
  return data;
}

// Only the selected uint8 images travel to the device; they become normalised floats there.
Batch makeBatch(const IdxDataset& split, const at::Tensor& indices, c10::Device device) {
  at::Tensor images = toDevice(split.images.index_select(0, indices), device).to(at::kFloat).unsqueeze(1);
  images.div_(255).sub_(kPixelMean).div_(kPixelStd);
  return {images, toDevice(split.labels.index_select(0, indices), device).to(at::kLong)};
}

void addFashionMetrics(const at::Tensor& logits, const at::Tensor& targets, double loss_sum, MetricSums& metrics) {
  metrics.add("cross_entropy", loss_sum);
  metrics.add("accuracy", logits.argmax(1).eq(targets).sum().item<double>());
  metrics.weight += static_cast<double>(targets.size(0));
}

class FashionBatchStream : public BatchStream {
 public:
  FashionBatchStream(std::shared_ptr<const FashionData> data, at::Tensor indices, int64_t batch_size, int64_t batches,
                     c10::Device device)
      : data_(std::move(data)),
        indices_(std::move(indices)),
        batch_size_(batch_size),
        batches_(batches),
        device_(device) {}

  std::optional<Batch> next() override {
    if (next_ == batches_) return std::nullopt;
    return makeBatch(data_->train, indices_.narrow(0, batch_size_ * next_++, batch_size_), device_);
  }

 private:
  std::shared_ptr<const FashionData> data_;
  at::Tensor indices_;
  int64_t batch_size_;
  int64_t batches_;
  c10::Device device_;
  int64_t next_ = 0;
};

// What the task refuses of its settings before it reads the data.
void checkFashionOptions(const TaskOptions& options, int64_t batch_size) {
  if (batch_size < 1) throw UserError("training.batch_size must be at least 1, got " + std::to_string(batch_size));
  if (options.test_batch_size < 1) {
    throw UserError("task.test_batch_size must be at least 1, got " + std::to_string(options.test_batch_size));
  }
}

int64_t fashionBatchCount(const FashionData& data, const Shard& shard, int64_t batch_size) {
  return DistributedSampler(data.train.labels.size(0), shard).batchCount(batch_size);
}

class FashionMnistTask : public Task {
 public:
  explicit FashionMnistTask(const TaskContext& context)
      : options_(context.options), batch_size_(context.batch_size), device_(context.device) {
    checkFashionOptions(options_, batch_size_);
    data_ = loadFashionData(options_, context.seed);
    model_ = models::buildModel(options_.architecture, {1, kFashionSide, kFashionClasses}, context.seed);
    model_->to(device_);
  }

  torch::nn::Module& model() override { return *model_; }

  int64_t batchesPerEpoch(const Shard& shard) const override { return fashionBatchCount(*data_, shard, batch_size_); }

  std::unique_ptr<BatchStream> trainBatches(const Shard& shard, int64_t epoch) override {
    DistributedSampler sampler(data_->train.labels.size(0), shard);
    return std::make_unique<FashionBatchStream>(data_, sampler.epochIndices(epoch), batch_size_,
                                                sampler.batchCount(batch_size_), device_);
  }

  at::Tensor trainLoss(const Batch& batch, MetricSums& metrics) override {
    model_->train();
    at::Tensor logits = model_->forward(batch.inputs);
    at::Tensor loss = torch::nn::functional::cross_entropy(logits, batch.targets);
    const double loss_sum = loss.item<double>() * static_cast<double>(batch.targets.size(0));
    addFashionMetrics(logits.detach(), batch.targets, loss_sum, metrics);
    return loss;
  }

  MetricSums evaluate(const Shard& shard, const std::string& split, const EvaluationLimits& limits) override;

  bool synthetic() const override { return options_.synthetic; }

 private:
  TaskOptions options_;
  int64_t batch_size_;
  c10::Device device_;
  std::shared_ptr<models::Classifier> model_;
  std::shared_ptr<const FashionData> data_;
};

MetricSums FashionMnistTask::evaluate(const Shard& shard, const std::string& split, const EvaluationLimits& limits) {
  namespace F = torch::nn::functional;
  if (split != "test") throw std::invalid_argument("fashion-mnist has no split '" + split + "'");
  torch::NoGradGuard no_grad;
  model_->eval();
  const at::Tensor indices = testShardIndices(data_->test.labels.size(0), shard, limits.max_samples);
  const int64_t chunk = evaluationChunk(options_.test_batch_size, device_);
  MetricSums metrics;
  for (int64_t start = 0; start < indices.size(0) && !(limits.stop && limits.stop()); start += chunk) {
    const int64_t size = std::min(chunk, indices.size(0) - start);
    Batch batch = makeBatch(data_->test, indices.narrow(0, start, size), device_);
    at::Tensor logits = model_->forward(batch.inputs);
    at::Tensor loss_sum = F::cross_entropy(logits, batch.targets, F::CrossEntropyFuncOptions().reduction(torch::kSum));
    addFashionMetrics(logits, batch.targets, loss_sum.item<double>(), metrics);
    limits.batchDone(start / chunk + 1, (indices.size(0) + chunk - 1) / chunk);
  }
  model_->train();
  return metrics;
}

}  // namespace

std::unique_ptr<Task> makeFashionMnistTask(const TaskContext& context) {
  return std::make_unique<FashionMnistTask>(context);
}

void checkFashionMnistInput(const TaskContext& context, int world_size) {
  checkFashionOptions(context.options, context.batch_size);
  const Shard shard{0, world_size};
  checkedBatchCount(fashionBatchCount(*loadFashionData(context.options, context.seed), shard, context.batch_size),
                    shard, context.batch_size);
}

ModelSize fashionMnistModelSize(const TaskOptions& options, int64_t /*batch_size*/) {
  return models::modelRegistry().at(options.architecture).factory.size({1, kFashionSide, kFashionClasses});
}

// No setting changes the architectures' sizes: built uninitialised on the CPU, a few MiB.
ModelPlan fashionMnistModelPlan(const TaskOptions& options, int64_t /*batch_size*/) {
  const auto& architecture = models::modelRegistry().at(options.architecture).factory;
  return {namedShapesOf(*architecture.make({1, kFashionSide, kFashionClasses})), std::nullopt};
}

}  // namespace gcrun::tasks
