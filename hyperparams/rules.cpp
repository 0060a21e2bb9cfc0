#include "hyperparams/rules.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gcrun::hyperparams {

Rule<int64_t> integerAtLeast(int64_t min, const std::string& note) {
  return {"an integer >= " + std::to_string(min) + note, [min](int64_t v) { return v >= min; }, {}};
}

Rule<double> numberAtLeast(double min) {
  return {"a number >= " + formatNumber(min), [min](double v) { return v >= min; }, {}};
}

Rule<double> numberAbove(double min) {
  return {"a number > " + formatNumber(min), [min](double v) { return v > min; }, {}};
}

Rule<double> numberFromTo(double min, double max, const std::string& note) {
  return {"a number from " + formatNumber(min) + " to " + formatNumber(max) + note,
          [min, max](double v) { return v >= min && v <= max; },
          {}};
}

Rule<double> fraction() {
  return {"a number in [0, 1)", [](double v) { return v >= 0.0 && v < 1.0; }, {}};
}

Rule<double> positiveFraction() {
  return {"a number in (0, 1]", [](double v) { return v > 0.0 && v <= 1.0; }, {}};
}

Rule<bool> boolean() { return {"true or false", nullptr, {}, {"true", "false"}}; }

Rule<std::string> oneOf(std::vector<std::string> choices) {
  std::string text = "one of: ";
  for (size_t i = 0; i < choices.size(); ++i) text += (i ? ", " : "") + choices[i];
  return {text,
          [choices](const std::string& v) { return std::find(choices.begin(), choices.end(), v) != choices.end(); },
          {},
          choices};
}

// Names of registry entries; the registries themselves check them when the run starts.
Rule<std::string> name() {
  return {"a non-empty name", [](const std::string& v) { return !v.empty(); }, {}};
}

Rule<std::string> text() { return {"a string", nullptr, std::string()}; }

std::string formatNumber(double value) {
  char text[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof(text), "%.*g", digits, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  // %g writes 150 as 1.5e+02 when two digits suffice; spell such whole numbers out.
  const char* exponent = std::strchr(text, 'e');
  const int power = exponent ? std::atoi(exponent + 1) : -1;
  if (power >= 0 && power < 16) std::snprintf(text, sizeof(text), "%.*g", power + 1, value);
  return text;
}

}  // namespace gcrun::hyperparams
