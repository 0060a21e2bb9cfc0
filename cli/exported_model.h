#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hyperparams/config.h"

namespace gcrun::cli {

// A finished run's model as `gcrun export` writes it (docs/export.md): the model its evaluations
// saw at the latest checkpoint, under the model's own parameter and buffer names.
//  - diloco, streaming-diloco, sparseloco: the global model θ_g (<strategy>/global/<parameter>),
//    not a worker's replica;
//  - local-sgd with several workers: the replicas' mean, as its evaluation averages them (equal to
//    every replica when the last step averaged);
//  - every other strategy (the workers' models agree): rank 0's parameters.
// Buffers (a ResNet's batch-norm statistics) are rank 0's. The GPT's output projection is tied to
// transformer.wte.weight; nanoGPT's state_dict names it lm_head.weight too, and so does this, as
// its own copy.
struct ExportedModel {
  std::vector<std::pair<std::string, at::Tensor>> tensors;  // contiguous, on the CPU, sorted by name
  int64_t step = 0;                                         // the checkpoint's
  int world_size = 1;
  std::string model;  // which model that is, in words: "global model (diloco)", ...
};

// The model of the run in `run_dir`, whose resolved settings are `config`. A run without a
// checkpoint, or a checkpoint that is unreadable, corrupt or lacks an entry the model needs, is a
// UserError naming the file and what is missing.
ExportedModel exportedModel(const std::string& run_dir, const ExperimentConfig& config);

}  // namespace gcrun::cli
