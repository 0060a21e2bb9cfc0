#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hyperparams/config.h"
#include "tasks/task.h"

namespace gcrun::cli {

// A finished run's model as `gcrun export` writes it (docs/export.md): the model its evaluations
// saw at the latest checkpoint, under the model's own parameter and buffer names.
//  - diloco, streaming-diloco, sparseloco: the global model θ_g (<strategy>/global/<parameter>),
//    not a worker's replica;
//  - local-sgd with several workers: the replicas' mean, as its evaluation averages them (equal to
//    every replica when the last step averaged);
//  - every other strategy (the workers' models agree): rank 0's parameters.
// Buffers (a ResNet's batch-norm statistics) are rank 0's. A language model whose output projection
// is tied to its token embedding (LanguageModelFacts::tied_output: the GPT's transformer.wte.weight)
// has it again under the tied name (nanoGPT's lm_head.weight), as its own entry.
struct ExportedModel {
  std::vector<std::pair<std::string, at::Tensor>> tensors;  // contiguous, on the CPU, sorted by name
  int64_t step = 0;                                         // the checkpoint's
  int world_size = 1;
  std::string model;  // which model that is, in words: "global model (diloco)", ...
};

// A run's resolved settings: its config.yaml, as written, and read back into a config.
struct RunSettings {
  std::string yaml;
  ExperimentConfig config;
};
// Those of the run directory `run`; a missing directory or config.yaml is a UserError naming it.
RunSettings runSettings(const std::string& run);

// What the run's task declares of its language model (TaskSpec::language_model); empty for a task
// that declares none or that is not registered (a plugin's, without its --plugin).
std::optional<tasks::LanguageModelFacts> languageModelFacts(const ExperimentConfig& config);

// The model of the run in `run_dir`, whose resolved settings are `config`. A run without a
// checkpoint, or a checkpoint that is unreadable, corrupt or lacks an entry the model needs, is a
// UserError naming the file and what is missing.
ExportedModel exportedModel(const std::string& run_dir, const ExperimentConfig& config);

}  // namespace gcrun::cli
