#include "tasks/language_model.h"

#include <array>
#include <cmath>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/utils.h>

#include "hyperparams/base/errors.h"
#include "tasks/data_location.h"
#include "tasks/device_transfer.h"
#include "tasks/language_model_data.h"
#include "tasks/model_plan.h"
#include "tasks/models/gpt.h"
#include "tasks/sampler.h"
#include "tasks/token_files.h"
#include "tasks/token_loss.h"
#include "tasks/token_sources/token_id_splits.h"
#include "tasks/token_sources/token_shards.h"
#include "tasks/wikitext.h"

namespace gcrun::tasks {
namespace {

constexpr int64_t kSyntheticTrain = 1000000;
constexpr int64_t kSyntheticHeldOut = 100000;
// Split i of the data (TokenSplits): its name in evaluate() (empty: training).
const std::array<const char*, 3> kSplitNames = {"", "validation", "test"};

// Synthetic ids number the level's settled vocabulary (a SentencePiece model's) or its default.
int64_t syntheticVocabulary(const LanguageModelOptions& settings) {
  const LanguageModelLevel& level = languageModelLevel(settings.level);
  const int64_t settled = level.settled(settings);
  return settled > 0 ? settled : level.synthetic_vocabulary;
}

std::shared_ptr<TokenSplits> randomTokenSplits(const TaskOptions& options, const LanguageModelOptions& settings,
                                               uint64_t seed) {
  const auto sizes = syntheticSizes(options, {kSyntheticTrain, kSyntheticHeldOut}, 10, 2);
  auto data = std::make_shared<TokenSplits>();
  data->vocabulary = syntheticVocabulary(settings);
  for (size_t i = 0; i < kSplitNames.size(); ++i) {
    at::Generator generator = at::detail::createCPUGenerator(streamSeed(seed, -2, static_cast<int64_t>(i)));
    data->ids[i] = at::randint(data->vocabulary, {i == 0 ? sizes.train : sizes.held_out}, generator,
                               at::TensorOptions().dtype(at::kLong));
    data->source[i] = std::string("the synthetic ") + (i == 0 ? "training" : kSplitNames[i]) + " split";
  }
  return data;
}

// Ranks run as threads of one process share one read-only copy of the data, and the process says
// once what it read.
std::shared_ptr<const TokenSplits> loadTokenSplits(const TaskOptions& options, const LanguageModelOptions& settings,
                                                   uint64_t seed) {
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<const TokenSplits>> cache;
  static std::set<std::string> said;
  const std::string& level = settings.level;
  const std::string dir = resolveDataDir(options.data_dir, kWikiText2Folder);
  const std::string key = level + " " + settings.tokenizer + " " + dataCacheKey(options, seed, dir) + "\n" +
                          settings.train_files + "\n" + settings.validation_files + "\n" + settings.test_files;
  std::lock_guard<std::mutex> lock(mutex);
  std::shared_ptr<const TokenSplits> data = cache[key].lock();
  if (!data) {
    data = options.synthetic ? randomTokenSplits(options, settings, seed)
                             : readLanguageModelData(dir, settings, options.vocabulary_size);
    cache[key] = data;
    if (!options.synthetic && said.insert(key).second) std::cout << dataLine(*data) << std::endl;
  }
  checkVocabularySize(options, data->vocabulary, options.synthetic ? "the synthetic corpus" : dir);
  return data;
}

void checkOptions(const TaskOptions& task, const LanguageModelOptions& options, int64_t batch_size) {
  if (task.architecture != "gpt") {
    throw UserError("task.architecture: '" + task.architecture +
                    "' is not a language-model model; it accepts: gpt (nanoGPT's GPT)");
  }
  // The level's own settings (task.tokenizer's model) are refused here too, before any data.
  languageModelLevel(options.level).settled(options);
  const std::pair<const char*, int64_t> positive[] = {{"task.context", options.context},
                                                      {"task.layers", options.layers},
                                                      {"task.heads", options.heads},
                                                      {"task.width", options.width},
                                                      {"training.batch_size", batch_size}};
  for (const auto& [key, value] : positive) {
    if (value < 1) throw UserError(std::string(key) + " must be at least 1, got " + std::to_string(value));
  }
  if (!(options.dropout >= 0 && options.dropout < 1)) {
    throw UserError("task.dropout must be in [0, 1), got " + hyperparams::formatNumber(options.dropout));
  }
  if (options.width % options.heads != 0) {
    throw UserError("task.heads: " + std::to_string(options.heads) + " does not divide task.width " +
                    std::to_string(options.width) + "; it accepts a divisor of the width");
  }
}

// Every split needs one window: T inputs and the target after them.
void checkSplits(const TokenSplits& data, int64_t context) {
  for (size_t i = 0; i < kSplitNames.size(); ++i) {
    const int64_t tokens = data.ids[i].size(0);
    if (tokens == 0) {
      throw UserError(data.source[i] + " is empty; every split needs at least task.context + 1 tokens");
    }
    if (tokens < context + 1) {
      throw UserError("task.context: " + std::to_string(context) + " is longer than " + data.source[i] + " allows (" +
                      std::to_string(tokens) +
                      " tokens, and a window needs task.context + 1); it "
                      "accepts at most " +
                      std::to_string(tokens - 1));
    }
  }
}

// The windows of T + 1 tokens (T inputs and the target after them) that `ids` holds.
int64_t windowCount(const at::Tensor& ids, int64_t context) { return (ids.size(0) - 1) / context; }

// Each worker's share of the training split's windows, in whole batches.
int64_t windowBatchCount(const TokenSplits& data, int64_t context, const Shard& shard, int64_t batch_size) {
  return (windowCount(data.ids[0], context) / shard.world_size) / batch_size;
}

class WindowStream : public BatchStream {
 public:
  WindowStream(at::Tensor ids, at::Tensor windows, int64_t context, int64_t batch_size, c10::Device device)
      : ids_(std::move(ids)),
        windows_(std::move(windows)),
        context_(context),
        batch_size_(batch_size),
        batches_(windows_.size(0) / batch_size),
        device_(device) {}

  std::optional<Batch> next() override {
    if (next_ == batches_) return std::nullopt;
    const Batch batch = windowBatch(ids_, windows_.narrow(0, next_++ * batch_size_, batch_size_), context_);
    return Batch{toDevice(batch.inputs, device_), toDevice(batch.targets, device_)};
  }

 private:
  at::Tensor ids_;
  at::Tensor windows_;
  int64_t context_;
  int64_t batch_size_;
  int64_t batches_;
  c10::Device device_;
  int64_t next_ = 0;
};

class LanguageModelTask : public Task {
 public:
  explicit LanguageModelTask(const TaskContext& context)
      : options_(context.options),
        settings_(languageModelSettings().read(context.options.settings)),
        batch_size_(context.batch_size),
        seed_(context.seed),
        device_(context.device) {
    checkOptions(options_, settings_, batch_size_);
    data_ = loadTokenSplits(options_, settings_, seed_);
    checkSplits(*data_, settings_.context);
    models::GptShape shape{data_->vocabulary, settings_.context, settings_.layers, settings_.heads,
                           settings_.width,   settings_.bias,    settings_.dropout};
    model_ = std::make_shared<models::GptModel>(shape, seed_);
    model_->to(device_);
  }

  torch::nn::Module& model() override { return *model_; }

  int64_t batchesPerEpoch(const Shard& shard) const override {
    return windowBatchCount(*data_, settings_.context, shard, batch_size_);
  }

  std::unique_ptr<BatchStream> trainBatches(const Shard& shard, int64_t epoch) override {
    model_->seedRandomness(streamSeed(seed_, shard.rank, epoch));
    return std::make_unique<WindowStream>(
        data_->ids[0], epochWindows(windowCount(data_->ids[0], settings_.context), seed_, epoch, shard),
        settings_.context, batch_size_, device_);
  }

  at::Tensor trainLoss(const Batch& batch, MetricSums& metrics) override {
    model_->train();
    at::Tensor loss = model_->loss(model_->forward(batch.inputs), batch.targets);
    addMeanTokenLoss(metrics, loss, batch.targets);
    return loss;
  }

  MetricSums evaluate(const Shard& shard, const std::string& split, const EvaluationLimits& limits) override;

  std::vector<std::string> evaluationSplits() const override { return {"validation", "test"}; }

  std::vector<std::string> embeddingParameters() const override {
    return {"transformer.wte.weight", "transformer.wpe.weight"};
  }

  std::map<std::string, double> finalize(std::map<std::string, double> means) const override {
    means = withPerplexity(std::move(means));
    const auto it = means.find("cross_entropy");
    if (it != means.end() && settings_.level == "char") means["bits_per_character"] = it->second / std::log(2.0);
    return means;
  }

  // The dropout generator, once an epoch has seeded it (never at dropout 0).
  void saveState(State& state) const override {
    const at::Tensor random = model_->randomState();
    if (random.defined()) state["dropout_generator"] = random.clone();
  }
  void loadState(const State& state) override {
    if (settings_.dropout > 0) model_->setRandomState(stateEntry(state, "language-model", "dropout_generator"));
  }

  bool isFormerBuffer(const std::string& name, const at::Tensor& saved) const override {
    return model_->isFormerBuffer(name, saved);
  }

  bool synthetic() const override { return options_.synthetic; }

 private:
  TaskOptions options_;
  LanguageModelOptions settings_;
  int64_t batch_size_;
  uint64_t seed_;
  c10::Device device_;
  std::shared_ptr<const TokenSplits> data_;
  std::shared_ptr<models::GptModel> model_;
};

MetricSums LanguageModelTask::evaluate(const Shard& shard, const std::string& split, const EvaluationLimits& limits) {
  size_t index = 1;
  while (index < kSplitNames.size() && split != kSplitNames[index]) ++index;
  if (index == kSplitNames.size()) throw std::invalid_argument("language-model has no split '" + split + "'");
  const at::Tensor& ids = data_->ids[index];
  int64_t windows = windowCount(ids, settings_.context);
  if (limits.max_samples > 0) windows = std::min(windows, limits.max_samples / settings_.context);
  const at::Tensor mine = testShardIndices(windows, shard);
  const int64_t chunk = evaluationChunk(options_.test_batch_size, device_);
  torch::NoGradGuard no_grad;
  model_->eval();
  MetricSums metrics = evaluationTokenLoss();
  for (int64_t start = 0; start < mine.size(0) && !(limits.stop && limits.stop()); start += chunk) {
    const Batch batch =
        windowBatch(ids, mine.narrow(0, start, std::min(chunk, mine.size(0) - start)), settings_.context);
    addTokenLoss(metrics, model_->forward(toDevice(batch.inputs, device_)), toDevice(batch.targets, device_),
                 TokenSum::in_double);
    limits.batchDone(start / chunk + 1, (mine.size(0) + chunk - 1) / chunk);
  }
  model_->train();
  return metrics;
}

}  // namespace

namespace {

std::string levelHelp() {
  std::string help = "language-model:";
  for (const auto& level : languageModelLevels()) {
    help += std::string(help.back() == ':' ? " " : ", ") + level.name + " (" + level.help + ")";
  }
  return help + ".";
}

}  // namespace

const hyperparams::SettingsSchema<LanguageModelOptions>& languageModelSettings() {
  using hyperparams::integerAtLeast;
  using O = LanguageModelOptions;
  static const auto schema =
      hyperparams::SettingsSchema<O>()
          .add(&O::level, "level", hyperparams::oneOf(languageModelLevelNames()), levelHelp())
          .add(&O::context, "context", integerAtLeast(1), "language-model: window length T (tokens).")
          .add(&O::layers, "layers", integerAtLeast(1), "language-model: transformer blocks.")
          .add(&O::heads, "heads", integerAtLeast(1), "language-model: attention heads (divide task.width).")
          .add(&O::width, "width", integerAtLeast(1), "language-model: embedding width d.")
          .add(&O::dropout, "dropout", hyperparams::fraction(), "language-model: dropout probability.")
          .add(&O::bias, "bias", hyperparams::boolean(), "language-model: biases in linear and LayerNorm layers.")
          .add(&O::train_files, "train_files", hyperparams::text(),
               "language-model: glob of the training files, relative to task.data_dir (empty: the level's default).")
          .add(&O::validation_files, "validation_files", hyperparams::text(),
               "language-model: glob of the validation files (empty: the level's default).")
          .add(&O::test_files, "test_files", hyperparams::text(),
               "language-model: glob of the test files (empty: the level's default; level tokens: the validation "
               "files).")
          .add(&O::tokenizer, "tokenizer", hyperparams::text(),
               "language-model, task.level sentencepiece: the SentencePiece .model file (Llama's, Gemma's, T5's, or "
               "one from `gcrun data tokenizer`); its pieces are the vocabulary.");
  return schema;
}

const std::string& requireTokenizerFile(const LanguageModelOptions& settings) {
  if (settings.tokenizer.empty()) {
    throw UserError(
        "task.tokenizer: task.level sentencepiece needs a SentencePiece .model file (e.g. from `gcrun data "
        "tokenizer --output FILE.model`)");
  }
  return settings.tokenizer;
}

Batch windowBatch(const at::Tensor& ids, const at::Tensor& windows, int64_t context) {
  const at::Tensor positions = windows.unsqueeze(1) * context + at::arange(context, windows.options()).unsqueeze(0);
  // int16 ids are uint16 bits (level tokens); the text levels' int16 ids are below 32,768, which this leaves as is.
  const auto widen = [&](const at::Tensor& picked) {
    return ids.scalar_type() == at::kShort ? unsignedTokenIds(picked) : picked.to(at::kLong);
  };
  return {widen(ids.index({positions})), widen(ids.index({positions + 1}))};
}

at::Tensor epochWindows(int64_t windows, uint64_t seed, int64_t epoch, const Shard& shard) {
  at::Generator generator = at::detail::createCPUGenerator(streamSeed(seed, -1, epoch));
  const at::Tensor permutation = at::randperm(windows, generator, at::TensorOptions().dtype(at::kLong));
  const int64_t per_rank = windows / shard.world_size;
  return permutation.slice(0, shard.rank, windows, shard.world_size).narrow(0, 0, per_rank).contiguous();
}

std::unique_ptr<Task> makeLanguageModelTask(const TaskContext& context) {
  return std::make_unique<LanguageModelTask>(context);
}

void checkLanguageModelInput(const TaskContext& context, int world_size) {
  const auto settings = languageModelSettings().read(context.options.settings);
  checkOptions(context.options, settings, context.batch_size);
  const auto data = loadTokenSplits(context.options, settings, context.seed);
  checkSplits(*data, settings.context);
  const Shard shard{0, world_size};
  checkedBatchCount(windowBatchCount(*data, settings.context, shard, context.batch_size), shard, context.batch_size);
}

namespace {

// The vocabulary's bounds without the data (the level's entry): synthetic data's is settled, and
// so is a SentencePiece model's; real char-level data has at most 256 ids, token files 65,536; a
// real word-level vocabulary is known once its files are read (or given).
int64_t settledVocabulary(const TaskOptions& options, const LanguageModelOptions& settings) {
  const int64_t settled = languageModelLevel(settings.level).settled(settings);
  return settled == 0 && options.synthetic ? syntheticVocabulary(settings) : settled;
}
int64_t vocabularyBound(const LanguageModelOptions& settings) { return languageModelLevel(settings.level).bound; }
// A plan asks token files' vocabulary of task.vocabulary_size rather than take uint16's bound.
int64_t plannedBound(const LanguageModelOptions& settings) {
  const LanguageModelLevel& level = languageModelLevel(settings.level);
  return level.plan_takes_bound ? level.bound : 0;
}

}  // namespace

// An unknown vocabulary counts as empty (the token files' 1 GiB bound bounds it). A training step
// keeps, per block, about 16 B T d activations and 3 B H T^2 attention weights (scores, softmax,
// masked), then 3 B T V of logits, and makes the T^2 causal mask.
ModelSize languageModelSize(const TaskOptions& options, int64_t batch_size) {
  const auto settings = languageModelSettings().read(options.settings);
  // What the task refuses of its settings alone, so that a plan (and the memory check) meets it
  // without the data.
  checkOptions(options, settings, batch_size);
  const int64_t vocabulary = vocabularyOf(options, settledVocabulary(options, settings), vocabularyBound(settings));
  ModelSize size = models::GptModel::size(
      {vocabulary, settings.context, settings.layers, settings.heads, settings.width, settings.bias, settings.dropout});
  const double b = static_cast<double>(batch_size), t = static_cast<double>(settings.context);
  const double d = static_cast<double>(settings.width), h = static_cast<double>(settings.heads);
  const double per_block = 16 * b * t * d + 3 * b * h * t * t;
  size.other_bytes = sizeof(float) * (static_cast<double>(settings.layers) * per_block +
                                      3 * b * t * static_cast<double>(vocabulary) + t * t);
  return size;
}

// The GPT built shape only; Kaplan et al.'s N leaves out the embedding tables (wte, wpe).
ModelPlan languageModelPlan(const TaskOptions& options, int64_t batch_size) {
  const auto settings = languageModelSettings().read(options.settings);
  checkOptions(options, settings, batch_size);
  const int64_t vocabulary = plannedVocabulary(options, settledVocabulary(options, settings), plannedBound(settings));
  const models::GptShape shape{
      vocabulary, settings.context, settings.layers, settings.heads, settings.width, settings.bias, 0};
  ModelPlan plan{namedShapesOf(models::GptModel(shape, ShapeOnly{})), std::nullopt};
  const double embeddings = double(vocabulary + settings.context) * double(settings.width);
  plan.transformer = TransformerFacts{settings.layers, settings.context, settings.width,
                                      models::GptModel::size(shape).parameterCount() - embeddings};
  return plan;
}

}  // namespace gcrun::tasks
