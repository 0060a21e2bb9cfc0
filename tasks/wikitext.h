#pragma once

#include <cstdint>
#include <istream>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/Tensor.h>

#include "tasks/task.h"

namespace gcrun::tasks {

// The folder of WikiText-2 (wiki.train.tokens, wiki.valid.tokens, wiki.test.tokens). With
// task.data_dir empty the task reads $GCRUN_DATA/wikitext-2, then ./data/wikitext-2.
inline constexpr const char* kWikiText2Folder = "wikitext-2";
inline constexpr int64_t kBpttLength = 30;

// Tokens of one file as the reference's torchtext Field(lower=True) sees them, except that gcrun
// splits on whitespace where the reference ran spaCy's tokenizer (which also splits some
// punctuation and emits whitespace tokens, so vocabularies differ slightly): every line gives its
// lower-cased (ASCII) tokens followed by "<eos>", so a blank line gives "<eos>" alone, as
// torchtext's LanguageModelingDataset does. A missing file is a UserError naming it.
std::vector<std::string> readTokenFile(const std::string& path);
// The same tokens from a stream (a file read whole within a bound, say).
std::vector<std::string> readTokens(std::istream& in);

// torchtext's Vocab: "<unk>" (index 0) and "<pad>" (index 1), then every training token by
// descending count, ties in byte order. Tokens outside it map to "<unk>".
class Vocabulary {
 public:
  explicit Vocabulary(const std::vector<std::string>& train_tokens);

  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  const std::string& token(int64_t index) const { return tokens_.at(index); }
  int64_t index(const std::string& token) const;
  at::Tensor encode(const std::vector<std::string>& tokens) const;  // int64 [N]

  static constexpr int64_t kUnknown = 0;
  static constexpr int64_t kPadding = 1;

 private:
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int64_t> indices_;
};

// torchtext's BPTTIterator layout: the ids are padded with "<pad>" to a multiple of `columns` and
// cut into `columns` contiguous streams, one per column: returns int64 [rows, columns].
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
// perplexity = exp(mean cross entropy). Evaluation splits "validation" (what the reference calls
// test) and "test", laid out as the training data.
std::unique_ptr<Task> makeWikiText2Task(const TaskContext& context);
// Its model's size (TaskSpec::size).
ModelSize wikiText2ModelSize(const TaskOptions& options, int64_t batch_size);

}  // namespace gcrun::tasks
