#include "cli/exported_model.h"

#include <algorithm>
#include <filesystem>

#include <torch/torch.h>

#include "experiments/setup/registered_keys.h"
#include "experiments/sync/synchronizer.h"
#include "experiments/training/checkpoint.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/config_io.h"
#include "outputs/files/safe_files.h"
#include "outputs/run_directory.h"
#include "tasks/task.h"

namespace gcrun::cli {
namespace {

// The most bytes of one rank file gcrun export reads: a 1.5 B-parameter GPT (GPT-2 XL) with AdamW's
// two moments and a global model with its outer momentum is about 36 GB. The file must also be a
// regular file no larger than its manifest says (CheckpointStore::readRank).
constexpr uint64_t kMaxExportedRankFileBytes = 64ull << 30;

constexpr char kParamPrefix[] = "param/";
constexpr char kBufferPrefix[] = "buffer/";

experiments::LoadedCheckpoint exportedRank(const std::string& run_dir, int rank) {
  auto loaded = experiments::CheckpointStore::readRank(run_dir, rank, kMaxExportedRankFileBytes);
  if (!loaded) {
    throw UserError(run_dir + ": no checkpoint (checkpoints/manifest.json is missing); a run writes one at its end");
  }
  return std::move(*loaded);
}

// The entries of `state` under `prefix`, the prefix taken off their names.
std::vector<std::pair<std::string, at::Tensor>> entriesUnder(const TensorMap& state, const std::string& prefix) {
  std::vector<std::pair<std::string, at::Tensor>> entries;
  for (const auto& [name, tensor] : state) {
    if (name.rfind(prefix, 0) == 0) entries.emplace_back(name.substr(prefix.size()), tensor);
  }
  return entries;
}

// The entry `key` of `loaded`, refused as corrupt unless it has `like`'s shape and dtype.
const at::Tensor& entryLike(const experiments::LoadedCheckpoint& loaded, const std::string& key, const at::Tensor& like,
                            const std::string& reference) {
  const auto found = loaded.state.find(key);
  if (found == loaded.state.end() || !found->second.sizes().equals(like.sizes()) ||
      found->second.scalar_type() != like.scalar_type()) {
    throw UserError(loaded.file + ": corrupt checkpoint: entry '" + key +
                    "' is missing or not of the shape and dtype of " + reference);
  }
  return found->second;
}

// Each parameter's θ_g entry, when the strategy keeps a global model; nothing when it keeps none.
bool useGlobalModel(const experiments::LoadedCheckpoint& loaded, const std::string& strategy,
                    std::vector<std::pair<std::string, at::Tensor>>& parameters) {
  const std::string prefix = strategy + "/global/";
  if (entriesUnder(loaded.state, prefix).empty()) return false;
  for (auto& [name, tensor] : parameters) {
    tensor = entryLike(loaded, prefix + name, tensor, std::string("'") + kParamPrefix + name + "'");
  }
  return true;
}

// The replicas' mean over the ranks' files, read one at a time (rank 0's given as `parameters`).
void averageReplicas(const std::string& run_dir, int world_size,
                     std::vector<std::pair<std::string, at::Tensor>>& parameters) {
  for (auto& entry : parameters) entry.second = entry.second.clone();
  for (int rank = 1; rank < world_size; ++rank) {
    const auto loaded = exportedRank(run_dir, rank);
    for (auto& [name, sum] : parameters) sum.add_(entryLike(loaded, kParamPrefix + name, sum, "rank 0's"));
  }
  for (auto& entry : parameters) entry.second.div_(world_size);
}

}  // namespace

RunSettings runSettings(const std::string& run) {
  if (!std::filesystem::is_directory(run)) {
    throw UserError(run + ": no such directory; expected a run directory (gcrun experiment's --output-dir)");
  }
  const std::string path = outputs::RunDirectory(run).pathOf(outputs::run_files::kConfig);
  if (const auto why = files::notRegularFileReason(path); !why.empty()) {
    throw UserError(run + ": not a gcrun run directory (its config.yaml: " + why + ")");
  }
  RunSettings settings{files::readBoundedFile(path, files::kMaxConfigBytes), {}};
  hyperparams::applyYaml(settings.config, settings.yaml, "file " + path, experiments::configKeys());
  return settings;
}

std::optional<tasks::LanguageModelFacts> languageModelFacts(const ExperimentConfig& config) {
  const auto& tasks = tasks::taskRegistry();
  if (!tasks.contains(config.task.name)) return std::nullopt;
  return tasks.at(config.task.name).factory.language_model;
}

ExportedModel exportedModel(const std::string& run_dir, const ExperimentConfig& config) {
  const auto saved_world_size = experiments::CheckpointStore::savedWorldSize(run_dir);
  const auto rank0 = exportedRank(run_dir, 0);
  ExportedModel exported;
  exported.step = rank0.step;
  exported.world_size = saved_world_size.value_or(1);
  auto parameters = entriesUnder(rank0.state, kParamPrefix);
  if (parameters.empty()) throw UserError(rank0.file + ": corrupt checkpoint: it holds no model parameters (param/)");
  const std::string& strategy = config.sync.strategy;
  if (useGlobalModel(rank0, strategy, parameters)) {
    exported.model = "global model (" + strategy + ")";
  } else if (experiments::synchronizerRegistry().at(strategy).factory.local_replicas && exported.world_size > 1) {
    // The workers' models differ between syncs and no global one is kept: evaluation sees their mean.
    averageReplicas(run_dir, exported.world_size, parameters);
    exported.model = "mean of the " + std::to_string(exported.world_size) + " workers' models (" + strategy + ")";
  } else {
    exported.model = "rank 0's model (" + strategy + ")";
  }
  exported.tensors = std::move(parameters);
  for (auto& buffer : entriesUnder(rank0.state, kBufferPrefix)) exported.tensors.push_back(std::move(buffer));
  if (const auto facts = languageModelFacts(config); facts && !facts->tied_output.empty()) {
    const auto embedding = std::find_if(exported.tensors.begin(), exported.tensors.end(),
                                        [&](const auto& entry) { return entry.first == facts->token_embedding; });
    if (embedding != exported.tensors.end()) {
      const at::Tensor tied = embedding->second;  // emplace_back may move the vector's elements
      exported.tensors.emplace_back(facts->tied_output, tied);
    }
  }
  for (auto& entry : exported.tensors) entry.second = entry.second.contiguous();
  std::sort(exported.tensors.begin(), exported.tensors.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return exported;
}

}  // namespace gcrun::cli
