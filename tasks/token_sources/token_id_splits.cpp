#include "tasks/token_sources/token_id_splits.h"

#include <optional>
#include <stdexcept>

#include <ATen/ATen.h>

#include "hyperparams/base/errors.h"
#include "hyperparams/base/machine_memory.h"
#include "tasks/token_sources/meta_pickle.h"
#include "tasks/token_sources/token_shards.h"

namespace gcrun::tasks {
namespace {

at::Tensor joinedShards(const std::vector<TokenShard>& shards, const std::string& first) {
  if (shards.size() == 1) return shards.front().ids;
  uint64_t bytes = 0;
  for (const auto& shard : shards) bytes += shard.ids.nbytes();
  const uint64_t available = availableMemoryBytes();
  if (bytes > available) {
    throw UserError(first + " and the " + std::to_string(shards.size() - 1) + " files after it in its split hold " +
                    std::to_string(bytes >> 20) + " MiB of tokens, which gcrun joins in memory, more than the " +
                    std::to_string(available >> 20) + " MiB available; use fewer files");
  }
  std::vector<at::Tensor> parts;
  for (const auto& shard : shards) parts.push_back(shard.ids);
  return at::cat(parts);
}

}  // namespace

std::pair<int64_t, std::string> tokenVocabulary(int64_t given, const std::string& meta_dir) {
  std::pair<int64_t, std::string> found{given, "task.vocabulary_size"};
  if (given <= 0) {
    const std::string meta = meta_dir + "/meta.pkl";
    const std::optional<int64_t> pickled = metaPickleVocabularySize(meta);
    found = pickled ? std::make_pair(*pickled, meta + "'s vocab_size")
                    : std::make_pair(kDefaultTokenVocabulary, "nanoGPT's default: no task.vocabulary_size, no " + meta);
  }
  if (found.first < 1 || found.first > kMaxTokenVocabulary) {
    throw UserError("a vocabulary of " + std::to_string(found.first) + " tokens (" + found.second +
                    ") for uint16 token files; it accepts 1 to " + std::to_string(kMaxTokenVocabulary));
  }
  return found;
}

TokenIdSplits readTokenIdSplits(const std::array<std::vector<std::string>, 3>& files, int64_t vocabulary) {
  TokenIdSplits splits;
  splits.vocabulary = vocabulary;
  for (size_t i = 0; i < files.size(); ++i) {
    if (i > 0 && files[i] == files[i - 1]) {
      splits.ids[i] = splits.ids[i - 1];
      splits.layouts[i] = splits.layouts[i - 1];
      continue;
    }
    std::vector<TokenShard> shards;
    for (const auto& path : files[i]) {
      shards.push_back(mapTokenShard(path));
      checkTokenIds(shards.back(), vocabulary, path);
    }
    if (shards.empty()) throw std::invalid_argument("readTokenIdSplits: a split without files");
    splits.layouts[i] = shards.front().layout;
    splits.ids[i] = joinedShards(shards, files[i].front());
  }
  return splits;
}

}  // namespace gcrun::tasks
