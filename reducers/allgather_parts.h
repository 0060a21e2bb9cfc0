#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "reducers/comm/communicator.h"

namespace gcrun::reducers {

// Every worker's `parts` (1-D, one per parameter, of the same sizes and dtype on every worker)
// concatenated, all-gathered in one collective and split back: result[w][i] is worker w's
// parts[i]. Adds the bits this worker sent (bitsOf what it put on the wire) to `bits`.
std::vector<std::vector<at::Tensor>> allgatherParts(comm::Communicator& comm, const std::vector<at::Tensor>& parts,
                                                    uint64_t& bits);

}  // namespace gcrun::reducers
