#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hyperparams/config.h"

namespace gcrun::reducers {

// The bits one worker sends per reduce() of reducer `name` with `options`, for float32 tensors
// of `shapes` at reducer.granularity layer: its registered ReducerSpec::planned_bits, the
// reducer's own bit accounting for those shapes, nothing allocated. Nothing for a reducer that is
// not registered or whose spec cannot plan: `gcrun plan` then names it.
std::optional<uint64_t> plannedBits(const std::string& name, const ReducerOptions& options,
                                    const std::vector<std::vector<int64_t>>& shapes);

// The registered reducers that can plan, by name, comma-separated: what `gcrun plan` offers
// instead of one that cannot.
std::string plannableReducers();

}  // namespace gcrun::reducers
