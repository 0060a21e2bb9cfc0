#include "hyperparams/config.h"

namespace gcrun {

template <>
const std::vector<std::string>& enumNames<Device>() {
  static const std::vector<std::string> names = {"cpu", "cuda"};
  return names;
}

template <>
const std::vector<std::string>& enumNames<Backend>() {
  static const std::vector<std::string> names = {"auto", "gloo", "nccl"};
  return names;
}

template <>
const std::vector<std::string>& enumNames<MomentumType>() {
  static const std::vector<std::string> names = {"nesterov", "heavy-ball", "exponential_moving_average"};
  return names;
}

template <>
const std::vector<std::string>& enumNames<Granularity>() {
  static const std::vector<std::string> names = {"layer", "model", "bucket"};
  return names;
}

}  // namespace gcrun
