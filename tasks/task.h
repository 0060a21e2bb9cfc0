#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "hyperparams/base/registry.h"
#include "hyperparams/base/tensor_map.h"
#include "hyperparams/config.h"
#include "hyperparams/settings.h"
#include "tasks/model_plan.h"
#include "tasks/model_size.h"

namespace torch::nn {
class Module;
}

namespace gcrun::tasks {

// This worker's place in the data-parallel group; tasks shard their data by it.
struct Shard {
  int rank = 0;
  int world_size = 1;
};

struct Batch {
  at::Tensor inputs;
  at::Tensor targets;
};

// Sample-weighted sums of metrics, so that workers can add theirs up before dividing.
struct MetricSums {
  std::map<std::string, double> sums;  // metric -> sum over samples of the per-sample value
  double weight = 0;                   // number of samples (or tokens)

  void add(const std::string& name, double sum) { sums[name] += sum; }
  void merge(const MetricSums& other);
  std::map<std::string, double> means() const;
};

// How much of a split one evaluation covers, and when it may end early.
struct EvaluationLimits {
  // The split's first samples (tokens for language models), all workers together; 0: all of it.
  int64_t max_samples = 0;
  // Polled between batches; once it returns true, evaluate() returns the sums so far, which the
  // trainer discards as it stops.
  std::function<bool()> stop;
  // Told after each batch how many of the split's batches are done, of how many (a progress line).
  // Its "= {}" keeps `{max_samples, stop}` a complete initializer (-Wmissing-field-initializers).
  std::function<void(int64_t done, int64_t total)> progress = {};

  void batchDone(int64_t done, int64_t total) const {
    if (progress) progress(done, total);
  }
};

// Yields one epoch of training batches for one worker.
class BatchStream {
 public:
  virtual ~BatchStream() = default;
  virtual std::optional<Batch> next() = 0;
};

// A Task is the model, its data and its loss.
//
// Contract:
//  - The model's parameters are built in the constructor from the context's seed alone, so every
//    worker starts from identical weights without a broadcast; the parameter order is fixed.
//  - trainBatches(shard, epoch) is deterministic in (seed, epoch, shard): across the ranks of one
//    epoch every training sample is used exactly once (up to the padding and drop_last of the
//    reference's sampler), each rank gets batchesPerEpoch(shard) batches of batch_size.
//  - trainLoss() runs the forward pass in training mode and adds the batch's metrics to `metrics`;
//    the trainer calls backward() on the returned scalar.
//  - evaluate(shard, split, limits) runs this rank's part of one evaluation split (of its first
//    limits.max_samples) in eval mode without gradients, in batches of evaluationChunk(), and
//    returns its sums; the trainer adds them up over ranks and calls finalize() on
//    the means. Every rank's sums name the same metrics, a rank whose part is empty too: the
//    trainer packs them in order into one all-reduce. evaluationSplits() names the splits, each "validation" or "test",
//    in the order the trainer evaluates them.
//  - localGradientClipNorm() > 0 makes the trainer clip this worker's gradient to that L2 norm
//    right after backward, before error feedback and compression (the reference's LSTM: 0.4).
class Task {
 public:
  virtual ~Task() = default;

  virtual torch::nn::Module& model() = 0;
  virtual int64_t batchesPerEpoch(const Shard& shard) const = 0;
  virtual std::unique_ptr<BatchStream> trainBatches(const Shard& shard, int64_t epoch) = 0;
  virtual at::Tensor trainLoss(const Batch& batch, MetricSums& metrics) = 0;
  virtual MetricSums evaluate(const Shard& shard, const std::string& split, const EvaluationLimits& limits) = 0;
  virtual std::vector<std::string> evaluationSplits() const { return {"test"}; }
  // The metric trainLoss() returns, as it names it in `metrics` (the per-step training loss).
  virtual std::string lossName() const { return "cross_entropy"; }
  virtual double localGradientClipNorm() const { return 0; }
  // The model's embedding tables by parameter name (token and position embeddings, a tied output
  // projection's shared weight): optimizers that exempt embeddings from weight decay ask here.
  virtual std::vector<std::string> embeddingParameters() const { return {}; }

  // Checkpoints: what trainLoss() carries from batch to batch within an epoch besides the
  // parameters (dropout generators, an LSTM's hidden state), as named tensors. The trainer saves
  // it with every checkpoint; resuming mid-epoch it calls loadState() after trainBatches() of the
  // saved epoch (which reseeds that state) and after skipping the batches already trained, so the
  // next trainLoss() is the saved run's. Resuming at an epoch start it does not call it. Data-side
  // randomness (augmentation) lives in the BatchStream, which the skipped next() calls replay.
  // loadState() throws std::invalid_argument naming a missing or mis-shaped entry.
  using State = TensorMap;
  virtual void saveState(State& /*state*/) const {}
  virtual void loadState(const State& /*state*/) {}

  // Checkpoints of earlier versions held model buffers that the model now makes as constants (the
  // GPT's causal mask): true when buffer `name` is one and `saved` is that constant, so that the
  // trainer ignores it; false for any other name. Throws std::invalid_argument naming a saved
  // value that differs from the constant.
  virtual bool isFormerBuffer(const std::string& /*name*/, const at::Tensor& /*saved*/) const { return false; }

  // Derived metrics from the reduced means (perplexity from cross entropy, say). Default: as is.
  virtual std::map<std::string, double> finalize(std::map<std::string, double> means) const { return means; }
  // Whether the data is synthetic (marked in every output).
  virtual bool synthetic() const = 0;
};

// How many batches each of `shard.world_size` workers gets per epoch; a UserError naming
// training.batch_size when the data leaves none (a batch larger than a worker's share).
int64_t batchesPerEpochOf(const Task& task, const Shard& shard, int64_t batch_size);
// The same for a count worked out without a task (TaskSpec::check).
int64_t checkedBatchCount(int64_t batches, const Shard& shard, int64_t batch_size);

struct TaskContext {
  const TaskOptions& options;
  int64_t batch_size;  // per worker
  uint64_t seed;
  c10::Device device;
};

using TaskFactory = std::function<std::unique_ptr<Task>(const TaskContext&)>;

// What a task whose model is a language model over text declares, so that what takes its model out
// of a run (gcrun export's metadata and nanoGPT's tensor names, gcrun sample) knows it without
// knowing the task's name; a plugin task declares it the same way.
struct LanguageModelFacts {
  // The task setting (task.<level_setting>) whose value names the tokenizer in tokenizerRegistry().
  std::string level_setting = "level";
  // The task setting naming the tokenizer's model file, where the level reads one (sentencepiece).
  std::string tokenizer_file_setting = "tokenizer";
  // The token embedding's parameter: its rows are the vocabulary.
  std::string token_embedding = "transformer.wte.weight";
  // The output projection when it is token_embedding itself (tied, no parameter of its own): export
  // writes the embedding again under this name, as nanoGPT's state_dict has it. Empty: untied.
  std::string tied_output = "lm_head.weight";
};

// How a task is registered, as a reducer is (reducers::ReducerSpec): its factory and the settings
// of its own it reads, keys task.<name> once registered; the factory reads them with its
// SettingsSchema from context.options.settings.
struct TaskSpec {
  TaskFactory make;
  std::vector<hyperparams::SettingSpec> settings = {};
  // Its model's size for these options and training.batch_size, from the settings alone (no data
  // read, nothing allocated): the memory check before a run. Empty: not estimated.
  std::function<ModelSize(const TaskOptions&, int64_t batch_size)> size = {};
  // Refuses bad input for `world_size` workers without building the model (its settings, its data
  // files and their sizes, training.batch_size against each worker's share), as a UserError: the
  // launcher's check before any worker starts. Empty: the launcher builds the task on the CPU
  // instead, as a worker would.
  std::function<void(const TaskContext&, int world_size)> check = {};
  // Its model for `gcrun plan` (ModelPlan): the parameters' names and shapes in the model's order
  // from the model's own code, built shape only, and a transformer's facts; called after size()
  // bounded the model. Where the data would decide the vocabulary it takes task.vocabulary_size,
  // refusing its absence with a UserError naming the key. Empty: the task cannot be planned.
  std::function<ModelPlan(const TaskOptions&, int64_t batch_size)> plan = {};
  // Set when its model is a language model over text (LanguageModelFacts); empty: it is not.
  std::optional<LanguageModelFacts> language_model = std::nullopt;
};

// The tasks gcrun knows, by `task.name`; built-ins are registered on first use. User code adds its
// own with taskRegistry().add(...) (plugins: in gcrun_register()).
Registry<TaskSpec>& taskRegistry();

}  // namespace gcrun::tasks
