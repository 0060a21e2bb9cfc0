#include "tasks/wikitext.h"
#include "tasks/device_transfer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <stdexcept>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/functional/loss.h>
#include <torch/utils.h>

#include "hyperparams/base/errors.h"
#include "tasks/data_location.h"
#include "tasks/model_plan.h"
#include "tasks/models/rnn_model.h"
#include "tasks/sampler.h"
#include "tasks/token_files.h"
#include "tasks/token_loss.h"

namespace gcrun::tasks {
namespace {

// The reference's vocabulary size (spaCy tokens of WikiText-2) and WikiText-2's token counts
// (whitespace tokens plus one <eos> per line): the shapes of the synthetic training data.
constexpr int64_t kWikiTextSyntheticVocabulary = 28869;
constexpr int64_t kWikiTextSyntheticTrain = 2088628;
// Synthetic perplexity means nothing: small held-out splits keep the evaluation of smoke runs short.
constexpr int64_t kWikiTextSyntheticHeldOut = 50000;
constexpr double kClipNorm = 0.4;

struct LanguageData {
  int64_t vocabulary = 0;
  at::Tensor train;                          // [N] of idType(vocabulary), int64 when synthetic
  std::map<std::string, at::Tensor> splits;  // "validation", "test"
};

std::shared_ptr<const LanguageData> readData(const std::string& dir) {
  TokenCorpus corpus = readTokenCorpus(dir, TokenLevel::kWord);
  auto data = std::make_shared<LanguageData>();
  data->vocabulary = corpus.vocabulary;
  data->train = corpus.ids[0];
  data->splits["validation"] = corpus.ids[1];
  data->splits["test"] = corpus.ids[2];
  return data;
}

std::shared_ptr<const LanguageData> randomData(const TaskOptions& options, uint64_t seed) {
  at::Generator generator = at::detail::createCPUGenerator(seed);
  const auto longs = at::TensorOptions().dtype(at::kLong);
  const auto sizes = syntheticSizes(options, {kWikiTextSyntheticTrain, kWikiTextSyntheticHeldOut}, 10, 2);
  auto data = std::make_shared<LanguageData>();
  data->vocabulary = kWikiTextSyntheticVocabulary;
  data->train = at::randint(0, kWikiTextSyntheticVocabulary, {sizes.train}, generator, longs);
  data->splits["validation"] = at::randint(0, kWikiTextSyntheticVocabulary, {sizes.held_out}, generator, longs);
  data->splits["test"] = at::randint(0, kWikiTextSyntheticVocabulary, {sizes.held_out}, generator, longs);
  return data;
}

// Ranks run as threads of one process share one read-only copy of the data.
std::shared_ptr<const LanguageData> loadWikiTextData(const TaskOptions& options, uint64_t seed) {
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<const LanguageData>> cache;
  const std::string dir = resolveDataDir(options.data_dir, kWikiText2Folder);
  const std::string key = dataCacheKey(options, seed, dir);
  std::lock_guard<std::mutex> lock(mutex);
  auto data = cache[key].lock();
  if (!data) {
    data = options.synthetic ? randomData(options, seed) : readData(dir);
    cache[key] = data;
  }
  checkVocabularySize(options, data->vocabulary, options.synthetic ? "the synthetic corpus" : dir);
  return data;
}

class BpttStream : public BatchStream {
 public:
  BpttStream(at::Tensor stream, Shard shard, int64_t width, int64_t batches, c10::Device device)
      : stream_(std::move(stream)), shard_(shard), width_(width), batches_(batches), device_(device) {}

  std::optional<Batch> next() override {
    if (next_ == batches_) return std::nullopt;
    Batch batch = bpttBatch(stream_, next_++, kBpttLength, shard_, width_);
    return Batch{toDevice(batch.inputs.to(at::kLong), device_), toDevice(batch.targets.to(at::kLong), device_)};
  }

 private:
  at::Tensor stream_;
  Shard shard_;
  int64_t width_;
  int64_t batches_;
  c10::Device device_;
  int64_t next_ = 0;
};

// What the task refuses of its settings before it reads the data.
void checkWikiTextOptions(const TaskOptions& options, int64_t batch_size) {
  if (batch_size < 1) throw UserError("training.batch_size must be at least 1, got " + std::to_string(batch_size));
  if (options.architecture != "lstm") {
    throw UserError("task.architecture: '" + options.architecture +
                    "' is not a wikitext2 model; it accepts: lstm (the reference's RNNModel)");
  }
}

int64_t wikiTextBatchCount(const LanguageData& data, const Shard& shard, int64_t batch_size) {
  return bpttBatchCount(data.train.size(0), batch_size * shard.world_size, kBpttLength);
}

class WikiText2Task : public Task {
 public:
  explicit WikiText2Task(const TaskContext& context)
      : options_(context.options), batch_size_(context.batch_size), seed_(context.seed), device_(context.device) {
    checkWikiTextOptions(options_, batch_size_);
    data_ = loadWikiTextData(options_, seed_);
    model_ = std::make_shared<models::RnnModel>(data_->vocabulary, seed_);
    model_->to(device_);
  }

  torch::nn::Module& model() override { return *model_; }

  int64_t batchesPerEpoch(const Shard& shard) const override { return wikiTextBatchCount(*data_, shard, batch_size_); }

  std::unique_ptr<BatchStream> trainBatches(const Shard& shard, int64_t epoch) override {
    model_->seedRandomness(streamSeed(seed_, shard.rank, epoch));
    hidden_ = model_->initHidden(batch_size_);
    const int64_t columns = batch_size_ * shard.world_size;
    return std::make_unique<BpttStream>(batchify(data_->train, columns), shard, batch_size_,
                                        bpttBatchCount(data_->train.size(0), columns, kBpttLength), device_);
  }

  at::Tensor trainLoss(const Batch& batch, MetricSums& metrics) override {
    model_->train();
    auto [logits, hidden] = model_->forward(batch.inputs, hidden_);
    hidden_ = {hidden.first.detach(), hidden.second.detach()};
    at::Tensor loss = torch::nn::functional::cross_entropy(logits.flatten(0, 1), batch.targets.flatten());
    addMeanTokenLoss(metrics, loss, batch.targets);
    return loss;
  }

  MetricSums evaluate(const Shard& shard, const std::string& split, const EvaluationLimits& limits) override;

  std::vector<std::string> evaluationSplits() const override { return {"validation", "test"}; }

  std::map<std::string, double> finalize(std::map<std::string, double> means) const override {
    return withPerplexity(std::move(means));
  }

  double localGradientClipNorm() const override { return kClipNorm; }

  // The dropout generator and the hidden state carried from batch to batch; nothing before the
  // first epoch has started.
  void saveState(State& state) const override {
    if (!hidden_.first.defined()) return;
    state["dropout_generator"] = model_->randomState().clone();
    state["hidden/h"] = hidden_.first.cpu();
    state["hidden/c"] = hidden_.second.cpu();
  }
  void loadState(const State& state) override {
    const auto entry = [&](const std::string& name, const at::Tensor& like) {
      const at::Tensor saved =
          stateEntry(state, "wikitext2", name);  // a handle, not a reference: gcc 14 warns it could dangle
      if (like.defined() && !saved.sizes().equals(like.sizes())) {
        throw std::invalid_argument("wikitext2 state: '" + name + "' has another shape than this run's hidden state");
      }
      return saved;
    };
    model_->setRandomState(entry("dropout_generator", at::Tensor()));
    hidden_ = {entry("hidden/h", hidden_.first).to(device_), entry("hidden/c", hidden_.second).to(device_)};
  }

  bool synthetic() const override { return options_.synthetic; }

 private:
  TaskOptions options_;
  int64_t batch_size_;
  uint64_t seed_;
  c10::Device device_;
  std::shared_ptr<models::RnnModel> model_;
  std::shared_ptr<const LanguageData> data_;
  models::RnnModel::Hidden hidden_;
};

// The reference's test(): the same column layout as training, a fresh hidden state carried across
// the batches, eval mode. It weights batches equally; gcrun weights tokens.
MetricSums WikiText2Task::evaluate(const Shard& shard, const std::string& split, const EvaluationLimits& limits) {
  const auto it = data_->splits.find(split);
  if (it == data_->splits.end()) throw std::invalid_argument("wikitext2 has no split '" + split + "'");
  torch::NoGradGuard no_grad;
  model_->eval();
  const int64_t columns = batch_size_ * shard.world_size;
  const at::Tensor stream = batchify(it->second, columns);
  models::RnnModel::Hidden hidden = model_->initHidden(batch_size_);
  MetricSums metrics = evaluationTokenLoss();
  // max_samples counts tokens: the batches (of up to kBpttLength x columns) that reach it.
  int64_t batches = bpttBatchCount(it->second.size(0), columns, kBpttLength);
  if (limits.max_samples > 0) {
    batches = std::min(batches, (limits.max_samples + kBpttLength * columns - 1) / (kBpttLength * columns));
  }
  for (int64_t index = 0; index < batches && !(limits.stop && limits.stop()); ++index) {
    const Batch batch = bpttBatch(stream, index, kBpttLength, shard, batch_size_);
    auto [logits, next] = model_->forward(batch.inputs.to(device_, at::kLong), hidden);
    hidden = next;
    addTokenLoss(metrics, logits, batch.targets.to(device_, at::kLong), TokenSum::in_float);
    limits.batchDone(index + 1, batches);
  }
  model_->train();
  return metrics;
}

}  // namespace

at::Tensor batchify(const at::Tensor& ids, int64_t columns) {
  if (columns < 1) throw std::invalid_argument("batchify needs at least one column");
  const int64_t rows = (ids.size(0) + columns - 1) / columns;
  at::Tensor padded = at::full({rows * columns}, kPaddingWord, ids.options());
  padded.narrow(0, 0, ids.size(0)).copy_(ids);
  return padded.view({columns, rows}).t().contiguous();
}

int64_t bpttBatchCount(int64_t tokens, int64_t columns, int64_t bptt) {
  const double rows = static_cast<double>(tokens) / static_cast<double>(columns);
  return std::max<int64_t>(0, static_cast<int64_t>(std::ceil((rows - 1) / static_cast<double>(bptt))));
}

Batch bpttBatch(const at::Tensor& stream, int64_t index, int64_t bptt, const Shard& shard, int64_t width) {
  const int64_t start = index * bptt;
  const int64_t length = std::min(bptt, stream.size(0) - start - 1);
  if (length < 1) throw std::out_of_range("BPTT batch " + std::to_string(index) + " is past the data");
  const at::Tensor mine = stream.narrow(1, shard.rank * width, width);
  return {mine.narrow(0, start, length), mine.narrow(0, start + 1, length)};
}

std::unique_ptr<Task> makeWikiText2Task(const TaskContext& context) { return std::make_unique<WikiText2Task>(context); }

void checkWikiText2Input(const TaskContext& context, int world_size) {
  checkWikiTextOptions(context.options, context.batch_size);
  const Shard shard{0, world_size};
  checkedBatchCount(wikiTextBatchCount(*loadWikiTextData(context.options, context.seed), shard, context.batch_size),
                    shard, context.batch_size);
}

// A real corpus's vocabulary is known once it is read (or given, task.vocabulary_size); before that
// its tables count as empty (the 1 GiB bound on the token files bounds them).
ModelSize wikiText2ModelSize(const TaskOptions& options, int64_t /*batch_size*/) {
  return models::RnnModel::size(
      static_cast<double>(vocabularyOf(options, options.synthetic ? kWikiTextSyntheticVocabulary : 0, 0)));
}

ModelPlan wikiText2ModelPlan(const TaskOptions& options, int64_t /*batch_size*/) {
  const int64_t vocabulary = plannedVocabulary(options, options.synthetic ? kWikiTextSyntheticVocabulary : 0, 0);
  return {namedShapesOf(models::RnnModel(vocabulary, ShapeOnly{})), std::nullopt};
}

}  // namespace gcrun::tasks
