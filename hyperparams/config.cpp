#include "hyperparams/config.h"

#include <cctype>

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

namespace {

// The whole of `text` as a decimal integer >= 1 (digits only: no sign, space or exponent).
std::optional<int64_t> stepNumber(const std::string& text) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  int64_t value = 0;
  for (const char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    value = value * 10 + (c - '0');
  }
  if (value < 1) return std::nullopt;
  return value;
}

}  // namespace

std::optional<StepWindow> parseStepWindow(const std::string& text) {
  const auto dash = text.find('-');
  const auto first = stepNumber(text.substr(0, dash));
  const auto last = dash == std::string::npos ? first : stepNumber(text.substr(dash + 1));
  if (!first || !last || *first > *last) return std::nullopt;
  return StepWindow{*first, *last};
}

}  // namespace gcrun
