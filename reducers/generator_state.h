#pragma once

#include <stdexcept>
#include <string>

#include <ATen/core/Generator.h>

#include "reducers/reducer.h"

namespace gcrun::reducers {

// A generator as a checkpoint entry: its full state (a byte tensor), so that the draws after
// loadState() are the ones the saved run made next.
inline void saveGenerator(Reducer::State& state, const std::string& name, const at::Generator& generator) {
  state[name] = generator.get_state().clone();
}

// `owner` names the reducer in the std::invalid_argument thrown for a missing entry.
inline void loadGenerator(const Reducer::State& state, const std::string& owner, const std::string& name,
                          at::Generator& generator) {
  generator.set_state(stateEntry(state, owner, name));
}

}  // namespace gcrun::reducers
