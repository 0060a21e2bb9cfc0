#include "tasks/cifar10.h"
#include "tasks/device_transfer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <stdexcept>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/TensorIndexing.h>
#include <torch/nn/functional/loss.h>
#include <torch/utils.h>

#include "hyperparams/base/errors.h"
#include "tasks/data_location.h"
#include "tasks/models/models.h"
#include "tasks/prefetch.h"
#include "tasks/sampler.h"

namespace gcrun::tasks {
namespace {

constexpr int64_t kCifarClasses = 10;
constexpr int64_t kCifarSide = 32;
constexpr int64_t kPixels = 3 * kCifarSide * kCifarSide;
constexpr int64_t kRecord = 1 + kPixels;
constexpr int64_t kPadding = 4;
constexpr int64_t kCifarSyntheticTrain = 50000;
// Synthetic accuracy means nothing: a small test split keeps the evaluation of smoke runs short.
constexpr int64_t kCifarSyntheticTest = 1000;
const char* const kTrainFiles[] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                                   "data_batch_5.bin"};
const char* const kTestFile = "test_batch.bin";

std::vector<char> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(path + ": cannot be read");
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

CifarSplit readBatches(const std::vector<std::string>& paths) {
  std::vector<at::Tensor> images, labels;
  for (const auto& path : paths) {
    const std::vector<char> bytes = readFile(path);
    const auto size = static_cast<int64_t>(bytes.size());
    if (size == 0 || size % kRecord != 0) {
      const int64_t last = size - size % kRecord;
      throw UserError(path + ": truncated or not a CIFAR-10 binary file: " + std::to_string(size) +
                      " bytes is not a positive multiple of the 3073-byte record; the record at offset " +
                      std::to_string(last) + " has " + std::to_string(size - last) + " bytes");
    }
    const int64_t records = size / kRecord;
    at::Tensor raw = at::empty({records, kRecord}, at::kByte);
    std::copy(bytes.begin(), bytes.end(), static_cast<char*>(raw.data_ptr()));
    at::Tensor label = raw.select(1, 0).contiguous();
    const at::Tensor bad = label.gt(kCifarClasses - 1).nonzero();
    if (bad.numel() > 0) {
      const int64_t record = bad[0][0].item<int64_t>();
      throw UserError(path + ": label " + std::to_string(label[record].item<int>()) + " at offset " +
                      std::to_string(record * kRecord) + " (record " + std::to_string(record) +
                      ") is not a CIFAR-10 class 0-9");
    }
    labels.push_back(label);
    images.push_back(raw.narrow(1, 1, kPixels).reshape({records, 3, kCifarSide, kCifarSide}));
  }
  return {at::cat(images), at::cat(labels)};
}

// A data_dir that holds the distribution's folder instead of its files is accepted too.
std::string filesDir(const std::string& dir) {
  const std::string nested = dir + "/" + kCifar10Folder;
  std::error_code error;
  if (!std::filesystem::exists(dir + "/" + kTestFile, error) && std::filesystem::is_directory(nested, error)) {
    return nested;
  }
  return dir;
}

CifarSplit randomCifarSplit(int64_t samples, at::Generator& generator) {
  const auto bytes = at::TensorOptions().dtype(at::kByte);
  at::Tensor images = at::randint(0, 256, {samples, 3, kCifarSide, kCifarSide}, generator, bytes);
  return {images, at::randint(0, kCifarClasses, {samples}, generator, bytes)};
}

// Ranks run as threads of one process share one read-only copy of the data.
std::shared_ptr<const Cifar10Data> loadCifarData(const TaskOptions& options, uint64_t seed) {
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<const Cifar10Data>> cache;
  const std::string dir = filesDir(resolveDataDir(options.data_dir, kCifar10Folder));
  const std::string key = dataCacheKey(options, seed, dir);
  std::lock_guard<std::mutex> lock(mutex);
  if (auto cached = cache[key].lock()) return cached;
  std::shared_ptr<const Cifar10Data> data;
  if (options.synthetic) {
    at::Generator generator = at::detail::createCPUGenerator(seed);
    const auto sizes = syntheticSizes(options, {kCifarSyntheticTrain, kCifarSyntheticTest}, 5, 1);
    CifarSplit train = randomCifarSplit(sizes.train, generator);
    data = std::make_shared<const Cifar10Data>(Cifar10Data{train, randomCifarSplit(sizes.held_out, generator)});
  } else {
    data = std::make_shared<const Cifar10Data>(readCifar10(dir));
  }
  cache[key] = data;
  return data;
}

void addCifarMetrics(const at::Tensor& logits, const at::Tensor& targets, double loss_sum, MetricSums& metrics) {
  const at::Tensor top5 = std::get<1>(logits.topk(std::min<int64_t>(5, logits.size(1))));
  const at::Tensor hits = top5.eq(targets.unsqueeze(1));
  metrics.add("cross_entropy", loss_sum);
  metrics.add("accuracy", hits.select(1, 0).sum().item<double>());
  metrics.add("top5_accuracy", hits.sum().item<double>());
  metrics.weight += static_cast<double>(targets.size(0));
}

void checkCifarBatchSize(int64_t batch_size) {
  if (batch_size < 1) throw UserError("training.batch_size must be at least 1, got " + std::to_string(batch_size));
}

int64_t cifarBatchCount(const Cifar10Data& data, const Shard& shard, int64_t batch_size) {
  return DistributedSampler(data.train.labels.size(0), shard).batchCount(batch_size);
}

class Cifar10Task : public Task {
 public:
  explicit Cifar10Task(const TaskContext& context)
      : options_(context.options), batch_size_(context.batch_size), seed_(context.seed), device_(context.device) {
    checkCifarBatchSize(batch_size_);
    data_ = loadCifarData(options_, seed_);
    model_ = models::buildModel(options_.architecture, {3, kCifarSide, kCifarClasses}, seed_);
    model_->to(device_);
  }

  torch::nn::Module& model() override { return *model_; }

  int64_t batchesPerEpoch(const Shard& shard) const override { return cifarBatchCount(*data_, shard, batch_size_); }

  std::unique_ptr<BatchStream> trainBatches(const Shard& shard, int64_t epoch) override {
    model_->seedRandomness(streamSeed(seed_, shard.rank, epoch) + 1);
    DistributedSampler sampler(data_->train.labels.size(0), shard);
    auto data = data_;
    const at::Tensor indices = sampler.epochIndices(epoch);
    const int64_t batches = sampler.batchCount(batch_size_);
    const int64_t batch_size = batch_size_;
    auto generator =
        std::make_shared<at::Generator>(at::detail::createCPUGenerator(streamSeed(seed_, shard.rank, epoch)));
    auto next = std::make_shared<int64_t>(0);
    auto produce = [data, indices, batches, batch_size, generator, next]() -> std::optional<Batch> {
      if (*next == batches) return std::nullopt;
      const at::Tensor chosen = indices.narrow(0, batch_size * (*next)++, batch_size);
      return Batch{augmentCifar(data->train.images.index_select(0, chosen), *generator),
                   data->train.labels.index_select(0, chosen).to(at::kLong)};
    };
    return std::make_unique<PrefetchingBatchStream>(produce, device_);
  }

  at::Tensor trainLoss(const Batch& batch, MetricSums& metrics) override {
    model_->train();
    at::Tensor logits = model_->forward(batch.inputs);
    at::Tensor loss = torch::nn::functional::cross_entropy(logits, batch.targets);
    addCifarMetrics(logits.detach(), batch.targets, loss.item<double>() * batch.targets.size(0), metrics);
    return loss;
  }

  MetricSums evaluate(const Shard& shard, const std::string& split, const EvaluationLimits& limits) override;

  // The model's dropout generator (VGG); augmentation draws replay with the skipped batches.
  void saveState(State& state) const override {
    const at::Tensor dropout = model_->randomState();
    if (dropout.defined()) state["dropout_generator"] = dropout.clone();
  }
  void loadState(const State& state) override {
    const auto found = state.find("dropout_generator");
    if (found != state.end()) model_->setRandomState(found->second);
  }

  bool synthetic() const override { return options_.synthetic; }

 private:
  TaskOptions options_;
  int64_t batch_size_;
  uint64_t seed_;
  c10::Device device_;
  std::shared_ptr<models::Classifier> model_;
  std::shared_ptr<const Cifar10Data> data_;
};

MetricSums Cifar10Task::evaluate(const Shard& shard, const std::string& split, const EvaluationLimits& limits) {
  namespace F = torch::nn::functional;
  if (split != "test") throw std::invalid_argument("cifar10 has no split '" + split + "'");
  torch::NoGradGuard no_grad;
  model_->eval();
  const CifarSplit& test = data_->test;
  const at::Tensor indices = testShardIndices(test.labels.size(0), shard, limits.max_samples);
  const int64_t chunk = evaluationChunk(options_.test_batch_size, device_);
  MetricSums metrics;
  for (int64_t start = 0; start < indices.size(0) && !(limits.stop && limits.stop()); start += chunk) {
    const at::Tensor chosen = indices.narrow(0, start, std::min(chunk, indices.size(0) - start));
    const at::Tensor images = normalizeCifar(toDevice(test.images.index_select(0, chosen), device_));
    const at::Tensor targets = toDevice(test.labels.index_select(0, chosen), device_).to(at::kLong);
    const at::Tensor logits = model_->forward(images);
    const at::Tensor loss_sum = F::cross_entropy(logits, targets, F::CrossEntropyFuncOptions().reduction(torch::kSum));
    addCifarMetrics(logits, targets, loss_sum.item<double>(), metrics);
    limits.batchDone(start / chunk + 1, (indices.size(0) + chunk - 1) / chunk);
  }
  model_->train();
  return metrics;
}

}  // namespace

Cifar10Data readCifar10(const std::string& dir) {
  std::vector<std::string> train;
  for (const char* file : kTrainFiles) train.push_back(dir + "/" + file);
  const std::string test = dir + "/" + kTestFile;
  std::vector<std::string> all = train;
  all.push_back(test);
  std::string missing_list;
  for (const auto& path : all) {
    std::error_code error;
    if (!std::filesystem::is_regular_file(path, error)) missing_list += (missing_list.empty() ? "" : ", ") + path;
  }
  if (!missing_list.empty()) {
    throw UserError("CIFAR-10 data not found: missing " + missing_list +
                    "; the task reads data_batch_1.bin, "
                    "data_batch_2.bin, data_batch_3.bin, data_batch_4.bin, data_batch_5.bin and test_batch.bin "
                    "from the \"CIFAR-10 binary version\" (cifar-10-binary.tar.gz) of "
                    "https://www.cs.toronto.edu/~kriz/cifar.html; set task.data_dir to their folder, or "
                    "GCRUN_DATA to the folder holding cifar-10-batches-bin");
  }
  return {readBatches(train), readBatches({test})};
}

at::Tensor normalizeCifar(const at::Tensor& images) {
  const auto options = at::TensorOptions().dtype(at::kFloat).device(images.device());
  const at::Tensor mean = at::tensor({0.4914, 0.4822, 0.4465}, options).view({1, 3, 1, 1});
  const at::Tensor std = at::tensor({0.2023, 0.1994, 0.2010}, options).view({1, 3, 1, 1});
  return images.to(at::kFloat).div_(255).sub_(mean).div_(std);
}

at::Tensor augmentCifar(const at::Tensor& images, at::Generator& generator) {
  using at::indexing::TensorIndex;
  const int64_t batch = images.size(0);
  const auto longs = at::TensorOptions().dtype(at::kLong);
  const at::Tensor padded = at::constant_pad_nd(images, {kPadding, kPadding, kPadding, kPadding}, 0);
  const at::Tensor top = at::randint(0, 2 * kPadding + 1, {batch, 1}, generator, longs);
  const at::Tensor left = at::randint(0, 2 * kPadding + 1, {batch, 1}, generator, longs);
  const at::Tensor flip = at::randint(0, 2, {batch, 1}, generator, longs).to(at::kBool);
  const at::Tensor line = at::arange(kCifarSide, longs).view({1, kCifarSide});
  const at::Tensor rows = top + line;
  const at::Tensor cols = left + at::where(flip, kCifarSide - 1 - line, line);
  const at::Tensor cropped = padded.index({TensorIndex(at::arange(batch, longs).view({batch, 1, 1, 1})),
                                           TensorIndex(at::arange(3, longs).view({1, 3, 1, 1})),
                                           TensorIndex(rows.view({batch, 1, kCifarSide, 1})),
                                           TensorIndex(cols.view({batch, 1, 1, kCifarSide}))});
  return normalizeCifar(cropped);
}

std::unique_ptr<Task> makeCifar10Task(const TaskContext& context) { return std::make_unique<Cifar10Task>(context); }

void checkCifar10Input(const TaskContext& context, int world_size) {
  checkCifarBatchSize(context.batch_size);
  const Shard shard{0, world_size};
  checkedBatchCount(cifarBatchCount(*loadCifarData(context.options, context.seed), shard, context.batch_size), shard,
                    context.batch_size);
}

ModelSize cifar10ModelSize(const TaskOptions& options, int64_t /*batch_size*/) {
  return models::modelRegistry().at(options.architecture).factory.size({3, kCifarSide, kCifarClasses});
}

// No setting changes the architectures' sizes: built uninitialised on the CPU, tens of MiB.
ModelPlan cifar10ModelPlan(const TaskOptions& options, int64_t /*batch_size*/) {
  const auto& architecture = models::modelRegistry().at(options.architecture).factory;
  return {namedShapesOf(*architecture.make({3, kCifarSide, kCifarClasses})), std::nullopt};
}

}  // namespace gcrun::tasks
