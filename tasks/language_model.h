#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hyperparams/settings.h"
#include "tasks/task.h"

namespace gcrun::tasks {

// The `language-model` task's own settings (keys task.<name>).
struct LanguageModelOptions {
  std::string level = "char";  // a name of languageModelLevels() (language_model_data.h)
  int64_t context = 64;        // T: the window length
  int64_t layers = 4;
  int64_t heads = 4;
  int64_t width = 128;
  double dropout = 0.0;
  bool bias = true;
  // Globs of each split's files (language_model_data.h); empty: the level's default files.
  std::string train_files;
  std::string validation_files;
  std::string test_files;
  std::string tokenizer;  // level sentencepiece: the SentencePiece .model file
};
const hyperparams::SettingsSchema<LanguageModelOptions>& languageModelSettings();
// task.tokenizer, which level sentencepiece needs: a UserError naming the key when it is empty.
const std::string& requireTokenizerFile(const LanguageModelOptions& settings);

// Training windows of `ids` ([N], any integer type) at context T: K = (N - 1) / T of them; window k has inputs
// ids[kT, kT + T) and targets ids[kT + 1, kT + T + 1). Returns inputs and targets int64 [windows.size, T]
// for the window numbers `windows` (int64 [n]), in that order. int16 ids are read as uint16 (level tokens'
// files); the text levels' int16 ids are below 32,768, so the same either way.
Batch windowBatch(const at::Tensor& ids, const at::Tensor& windows, int64_t context);

// Rank r's window numbers in epoch e: randperm(K) from a CPU generator seeded streamSeed(seed, -1,
// e), positions r, r + W, r + 2W, ... of it, the first K / W of them (the tail dropped).
at::Tensor epochWindows(int64_t windows, uint64_t seed, int64_t epoch, const Shard& shard);

// The `language-model` task: nanoGPT's GPT (task.architecture `gpt`, tasks/models/gpt.h) on the
// three wiki.*.tokens files of task.data_dir (default folder: WikiText-2's) or the files
// task.*_files name, at char or word level or as the pieces of the SentencePiece model
// task.tokenizer (level sentencepiece, docs/tokenizers.md); or on pre-tokenized uint16 files (level
// tokens): see language_model_data.h and docs/data-files.md. Loading says what was read, once per
// process.
//  - Training: the shuffled windows of epochWindows(), training.batch_size per batch and worker;
//    batchesPerEpoch = (K / W) / B. Dropout masks from a generator reseeded per (seed, rank, epoch).
//  - Evaluation, splits "validation" then "test": the split's windows in order (the first
//    evaluation.max_samples / T when that is set), rank r taking r, r + W, ..., in chunks of
//    evaluationChunk() windows; per chunk the per-token cross entropies (float, reduction none)
//    summed in double, the chunks' sums added in order; weighted by tokens.
//  - Metrics (token_loss.h): cross_entropy (per token), perplexity = exp(cross_entropy), and at char level
//    bits_per_character = cross_entropy / ln 2.
//  - Synthetic data: vocabulary 65 (char), 10,000 (word) or the model's (sentencepiece), ids randint(V, {N}) (int64)
//  from a CPU
//    generator seeded streamSeed(seed, -2, split) for split 0 train, 1 validation, 2 test; N is
//    1,000,000 for train and 100,000 per held-out split, or with task.synthetic_samples = S > 0, S
//    and max(2, S / 10) (syntheticSizes, as the wikitext2 task).
// Bad settings and data are UserErrors naming the key or file.
std::unique_ptr<Task> makeLanguageModelTask(const TaskContext& context);
// TaskSpec::check: its settings, data and each worker's share of batches, without a model.
void checkLanguageModelInput(const TaskContext& context, int world_size);
// Its model's size (TaskSpec::size).
ModelSize languageModelSize(const TaskOptions& options, int64_t batch_size);
// Its model for `gcrun plan` (TaskSpec::plan).
ModelPlan languageModelPlan(const TaskOptions& options, int64_t batch_size);

}  // namespace gcrun::tasks
