#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hyperparams/config.h"

namespace gcrun::reducers {

// The bits one worker sends per reduce() of reducer `name` with `options`, for float32 tensors
// of `shapes` at reducer.granularity layer: what the reducer's own bit accounting gives for those
// shapes (builtin_reducers.h), nothing allocated. Nothing for a reducer whose message depends on
// the values or that does not say (a plugin's): `gcrun plan` then names it.
std::optional<uint64_t> plannedBits(const std::string& name, const ReducerOptions& options,
                                    const std::vector<std::vector<int64_t>>& shapes);

}  // namespace gcrun::reducers
