#pragma once

// How configuration values are read from YAML and written back, for every field type: the key
// table (config_keys.cpp) and the declared settings (settings.cpp) share them. Internal to
// hyperparams/.

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "hyperparams/base/decimal.h"
#include "hyperparams/config.h"
#include "hyperparams/rules.h"

namespace gcrun::hyperparams::yaml_values {

// The largest number a setting may be: numbers reach the tensors as float, and a larger one
// fails only at the first step, after the run directory exists.
inline constexpr double kLargestNumber = std::numeric_limits<float>::max();

// Reading one value of each field type; false when the node is of the wrong shape or type.
// Numbers are plain decimals (gcrun's one parser of them, hyperparams/base/decimal.h): YAML's own
// would also take 0x10, 010 as octal, .inf and .nan.
inline bool parse(const YAML::Node& node, int64_t& out) {
  const auto value = node.IsScalar() ? parseWholeNumber(node.Scalar()) : std::nullopt;
  if (value) out = *value;
  return value.has_value();
}

inline bool parse(const YAML::Node& node, bool& out) { return YAML::convert<bool>::decode(node, out); }

inline bool parse(const YAML::Node& node, double& out) {
  const auto value = node.IsScalar() ? parseDecimal(node.Scalar()) : std::nullopt;
  if (!value || std::fabs(*value) > kLargestNumber) return false;
  out = *value;
  return true;
}

// Why a number a key refused is out of every range, for its message: "" unless it is one.
inline std::string beyondFloat(const YAML::Node& node) {
  const auto value = node.IsScalar() ? parseDecimal(node.Scalar()) : std::nullopt;
  if (!value || std::fabs(*value) <= kLargestNumber) return "";
  return " (and at most about 3.4e38 in size: numbers are used as float)";
}

inline bool parse(const YAML::Node& node, std::string& out) {
  if (!node.IsScalar()) return false;
  out = node.Scalar();
  return true;
}

inline bool parse(const YAML::Node& node, std::optional<double>& out) {
  if (node.IsNull()) {
    out.reset();
    return true;
  }
  double value = 0.0;
  if (!parse(node, value)) return false;
  out = value;
  return true;
}

// A single scalar is read as a one-element list.
template <class T>
bool parse(const YAML::Node& node, std::vector<T>& out) {
  std::vector<T> values;
  if (node.IsScalar()) {
    values.emplace_back();
    if (!parse(node, values.back())) return false;
  } else if (node.IsSequence()) {
    for (const auto& item : node) {
      values.emplace_back();
      if (!parse(item, values.back())) return false;
    }
  } else {
    return false;
  }
  out = std::move(values);
  return true;
}

template <class E, std::enable_if_t<std::is_enum_v<E>, int> = 0>
bool parse(const YAML::Node& node, E& out) {
  if (!node.IsScalar()) return false;
  const auto& names = enumNames<E>();
  const auto found = std::find(names.begin(), names.end(), node.Scalar());
  if (found == names.end()) return false;
  out = static_cast<E>(found - names.begin());
  return true;
}

inline bool parse(const YAML::Node& node, SettingValue& out) {
  return std::visit([&](auto& value) { return parse(node, value); }, out);
}

inline YAML::Node toNode(int64_t value) { return YAML::Node(value); }
inline YAML::Node toNode(bool value) { return YAML::Node(value); }
inline YAML::Node toNode(double value) { return YAML::Node(formatNumber(value)); }
inline YAML::Node toNode(const std::string& value) { return YAML::Node(value); }

template <class E, std::enable_if_t<std::is_enum_v<E>, int> = 0>
YAML::Node toNode(E value) {
  return YAML::Node(nameOf(value));
}

inline YAML::Node toNode(const SettingValue& value) {
  return std::visit([](const auto& v) { return toNode(v); }, value);
}

inline YAML::Node toNode(const std::optional<double>& value) {
  return value ? toNode(*value) : YAML::Node(YAML::NodeType::Null);
}

template <class T>
YAML::Node toNode(const std::vector<T>& values) {
  YAML::Node node(YAML::NodeType::Sequence);
  for (const auto& value : values) node.push_back(toNode(value));
  node.SetStyle(YAML::EmitterStyle::Flow);
  return node;
}

}  // namespace gcrun::hyperparams::yaml_values
