#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <ATen/core/Tensor.h>

#include "tasks/task.h"

namespace gcrun::tasks {

// The folder of WikiText-2 (wiki.train.tokens, wiki.valid.tokens, wiki.test.tokens). With
// task.data_dir empty the task reads $GCRUN_DATA/wikitext-2, then ./data/wikitext-2.
inline constexpr const char* kWikiText2Folder = "wikitext-2";
inline constexpr int64_t kBpttLength = 30;

// torchtext's BPTTIterator layout: the ids are padded with "<pad>" to a multiple of `columns` and
// cut into `columns` contiguous streams, one per column: returns [rows, columns] of the ids' type.
at::Tensor batchify(const at::Tensor& ids, int64_t columns);

// BPTTIterator's length for `tokens` ids in `columns` columns: ceil((tokens / columns - 1) / bptt).
int64_t bpttBatchCount(int64_t tokens, int64_t columns, int64_t bptt);

// Batch `index` of a batchified [rows, columns] stream, this worker's columns only: rank r of the
// shard takes columns [r * width, (r + 1) * width). Inputs are rows [i, i + len), targets the rows
// one later, with i = index * bptt and len = min(bptt, rows - i - 1), as BPTTIterator cuts them.
Batch bpttBatch(const at::Tensor& stream, int64_t index, int64_t bptt, const Shard& shard, int64_t width);

// The `wikitext2` task: the reference's 3-layer LSTM language model (task.architecture `lstm`) on
// the three token files. Each of the W workers takes its own training.batch_size columns of
// batch_size x W columns, the hidden state runs on across batches (detached) and restarts each
// epoch, and the local gradient is clipped to norm 0.4. Metrics cross_entropy (per token) and
// perplexity = exp(mean cross entropy), as token_loss.h adds them up. Evaluation splits
// "validation" (what the reference calls test) and "test", laid out as the training data.
std::unique_ptr<Task> makeWikiText2Task(const TaskContext& context);
// TaskSpec::check: its settings, data and each worker's share of batches, without a model.
void checkWikiText2Input(const TaskContext& context, int world_size);
// Its model's size (TaskSpec::size).
ModelSize wikiText2ModelSize(const TaskOptions& options, int64_t batch_size);
// Its model for `gcrun plan` (TaskSpec::plan).
ModelPlan wikiText2ModelPlan(const TaskOptions& options, int64_t batch_size);

}  // namespace gcrun::tasks
