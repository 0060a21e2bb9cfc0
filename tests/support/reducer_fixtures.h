#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "reducers/reducer.h"

namespace gcrun::testing {

// A registered reducer with `options` (its name set to `name`) and the tests' shared seed 42.
inline std::unique_ptr<reducers::Reducer> buildReducer(const std::string& name, comm::Communicator& comm,
                                                       ReducerOptions options = {}) {
  options.name = name;
  return reducers::reducerRegistry().at(name).factory.make(reducers::ReducerContext{comm, options, /*seed=*/42, /*parameters=*/{}});
}

// Deep copies, for keeping a reducer's input: reducers may use `send` as scratch space.
inline std::vector<at::Tensor> clones(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  for (const auto& t : tensors) out.push_back(t.clone());
  return out;
}

}  // namespace gcrun::testing
