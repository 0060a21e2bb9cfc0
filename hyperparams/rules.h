#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace gcrun::hyperparams {

// What a configuration value may be: the text shown to users, the check, and what a YAML null
// stands for where null is allowed (a key without `if_null` rejects null, unless its type is itself
// optional). Built-in keys and the settings that reducers declare use the same rules.
template <class T>
struct Rule {
  std::string accepted;
  std::function<bool(const T&)> ok;
  std::optional<T> if_null;
  // The values it accepts when they are few (an enumeration, a boolean): what shell completion
  // offers. Empty: too many to list.
  std::vector<std::string> choices = {};
};

Rule<int64_t> integerAtLeast(int64_t min, const std::string& note = "");
Rule<double> numberAtLeast(double min);
Rule<double> numberAbove(double min);
Rule<double> numberFromTo(double min, double max, const std::string& note = "");
Rule<double> fraction();          // [0, 1)
Rule<double> positiveFraction();  // (0, 1]
Rule<bool> boolean();
Rule<std::string> oneOf(std::vector<std::string> choices);
Rule<std::string> name();  // a non-empty registry name
Rule<std::string> text();  // any string; null is ""

// The shortest decimal text that reads back as exactly `value` (0.1 -> "0.1", not 17 digits).
std::string formatNumber(double value);

}  // namespace gcrun::hyperparams
