#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "experiments/sync/strategy_requirements.h"
#include "hyperparams/config.h"
#include "reducers/comm/communicator.h"

namespace gcrun::experiments {

// Helpers of the strategies that put their own compressed payload on the wire (sparseloco, demo).

// Such a strategy uses no reducer, so only `exact` (which it never calls) is accepted: adds that to
// `requirements`, whose message then reads, e.g., "reducer.name: sparseloco sends its own 2-bit top-k
// payload and uses no reducer; set reducer.name=exact (got 'powersgd')".
void requireNoReducer(StrategyRequirements& requirements, const ExperimentConfig& config, const std::string& strategy,
                      const std::string& payload);

// Every worker's `parts` (1-D, one per parameter, of the same sizes and dtype on every worker)
// concatenated, all-gathered in one collective and split back: result[w][i] is worker w's
// parts[i]. Adds the bits this worker sent (reducers::bitsOf of what it put on the wire) to `bits`.
std::vector<std::vector<at::Tensor>> allgatherParts(comm::Communicator& comm, const std::vector<at::Tensor>& parts,
                                                    uint64_t& bits);

}  // namespace gcrun::experiments
