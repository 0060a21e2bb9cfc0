#pragma once

#include <memory>

#include "reducers/reducer.h"

namespace gcrun::reducers {

// The factories reducerRegistry() registers on first use.
std::unique_ptr<Reducer> makeExactReducer(const ReducerContext& context);
std::unique_ptr<Reducer> makePowerSgdReducer(const ReducerContext& context);

}  // namespace gcrun::reducers
