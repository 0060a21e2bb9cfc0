#pragma once

#include <map>
#include <stdexcept>
#include <string>

#include <ATen/core/Tensor.h>

namespace gcrun {

// Named tensors: a checkpoint's content, and the state a reducer or task saves into it.
using TensorMap = std::map<std::string, at::Tensor>;

// The entry `name` of `state`; std::invalid_argument "<owner> state: '<name>' is missing" when
// absent, which the checkpoint loader turns into a UserError naming the file.
inline const at::Tensor& stateEntry(const TensorMap& state, const std::string& owner, const std::string& name) {
  const auto found = state.find(name);
  if (found == state.end()) throw std::invalid_argument(owner + " state: '" + name + "' is missing");
  return found->second;
}

}  // namespace gcrun
