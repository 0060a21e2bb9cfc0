#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>

#include <ATen/core/Tensor.h>

#include "hyperparams/base/errors.h"

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

// The integer scalar `name` of `state`, which must lie in [lowest, highest]: a count read back from
// a checkpoint is bounded by what the saved run could have done, so that a crafted one can neither
// overflow what is computed from it nor make a restore replay it for ever. Otherwise
// std::invalid_argument "<owner> state: '<name>' ..." naming the value and the range.
inline int64_t stateCount(const TensorMap& state, const std::string& owner, const std::string& name, int64_t lowest,
                          int64_t highest) {
  const at::Tensor& entry = stateEntry(state, owner, name);
  const std::string what = owner + " state: '" + name + "'";
  if (entry.numel() != 1 || entry.scalar_type() != at::kLong) {
    throw std::invalid_argument(what + " is not one 64-bit integer");
  }
  const int64_t value = entry.item<int64_t>();
  if (value < lowest || value > highest) {
    throw std::invalid_argument(what + " is " + std::to_string(value) + ", outside " + std::to_string(lowest) + " to " +
                                std::to_string(highest));
  }
  return value;
}

// The same for a checkpoint's own entries (counter/, a strategy's or optimizer's): a UserError
// "checkpoint state: '<name>' ..." naming the entry.
inline int64_t checkpointCount(const TensorMap& state, const std::string& name, int64_t lowest, int64_t highest) {
  try {
    return stateCount(state, "checkpoint", name, lowest, highest);
  } catch (const std::invalid_argument& e) {
    throw UserError(e.what());
  }
}

// A checkpoint's counter/step, which bounds whatever else the run counted (optimizer and outer
// steps, syncs); at most 2^62, more than any run makes, so that counts derived from it cannot
// overflow.
inline int64_t savedStep(const TensorMap& state) { return checkpointCount(state, "counter/step", 0, int64_t{1} << 62); }

}  // namespace gcrun
