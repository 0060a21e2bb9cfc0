#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hyperparams/config.h"
#include "outputs/planning/plan_model.h"

namespace gcrun::cli {

// What `gcrun plan` is asked to plan: the experiment as `gcrun experiment` takes it, and the
// configurations to try on top of it.
struct PlanRequest {
  std::string preset;
  std::string config_file;
  std::vector<std::string> assignments;  // --set, in order
  std::string configurations_file;       // --configurations; empty: the default grid
  int64_t sync_every = 100;              // H of the default grid's diloco and streaming-diloco
};

// The model as its settings describe it (nothing allocated, no data read).
struct PlannedModel {
  double parameters = 0;
  std::string task;
  // A language model's shape, for FLOPs per token (0 for other tasks).
  double non_embedding_parameters = 0;
  int64_t layers = 0, context = 0, width = 0, batch_size = 0;
};

struct PlannedConfigurations {
  PlannedModel model;  // the first configuration's (they may differ only in how they sync)
  std::vector<planning::PlannedMethod> methods;
  std::vector<ReducerOptions> reducers;  // each method's reducer settings, for timing its codec
};

// Every configuration resolved and checked as `gcrun experiment` would (bar the machine's memory),
// its model's tensors from its settings alone, and what its reducer sends for them per bucket or
// per fragment. Throws UserError naming the configuration and what it refuses.
PlannedConfigurations planConfigurations(const PlanRequest& request);

}  // namespace gcrun::cli
