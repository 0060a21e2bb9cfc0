// Bandwidths and durations as people write them ("10gbit", "125MB", "20us"), both ways.
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "hyperparams/base/errors.h"
#include "outputs/network/network_profile.h"
#include "outputs/network/shortest_number.h"

namespace gcrun::network {
namespace {

struct Unit {
  const char* name;
  double scale;  // bytes per second, or seconds
};

// Bit rates first: where a bit and a byte spelling are as short, the bit rate is the usual one.
const std::vector<Unit>& bandwidthUnits() {
  static const std::vector<Unit> units = {{"gbit", 1e9 / 8},
                                          {"mbit", 1e6 / 8},
                                          {"kbit", 1e3 / 8},
                                          {"bit", 1.0 / 8},
                                          {"GB", 1e9},
                                          {"MB", 1e6},
                                          {"KB", 1e3},
                                          {"GiB", 1024.0 * 1024 * 1024},
                                          {"MiB", 1024.0 * 1024},
                                          {"KiB", 1024.0},
                                          {"B", 1.0}};
  return units;
}

const std::vector<Unit>& durationUnits() {
  static const std::vector<Unit> units = {{"s", 1.0}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}};
  return units;
}

std::string unitNames(const std::vector<Unit>& units) {
  std::string names;
  for (const auto& unit : units) names += (names.empty() ? "" : ", ") + std::string(unit.name);
  return names;
}

// The number in front and the unit after it; false when the text does not begin with a number.
bool splitQuantity(const std::string& text, double& number, std::string& unit) {
  const char* begin = text.c_str();
  char* end = nullptr;
  number = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(number)) return false;
  unit = std::string(end);
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  return true;
}

// Bit rates in any case ("1Gbit"); byte units as written, where K, M and G are decimal, Ki, Mi and Gi
// binary.
bool sameUnit(const std::string& given, const std::string& name) {
  if (given.size() != name.size()) return false;
  if (name.size() < 3 || name.compare(name.size() - 3, 3, "bit") != 0) return given == name;
  for (size_t i = 0; i < name.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(given[i])) != name[i]) return false;
  }
  return true;
}

// Applies the unit's scale; throws when the unit is not one of `units`.
double scaled(const std::string& text, const std::string& what, const std::vector<Unit>& units, const char* kind) {
  double number = 0;
  std::string unit;
  const std::string accepted = std::string(kind) + " with a unit (" + unitNames(units) + ")";
  if (!splitQuantity(text, number, unit)) throw UserError(what + ": '" + text + "' is not " + accepted);
  for (const auto& known : units) {
    if (sameUnit(unit, known.name)) return number * known.scale;
  }
  throw UserError(what + ": '" + text + "' has " + (unit.empty() ? "no unit" : "an unknown unit '" + unit + "'") +
                  "; expected " + accepted + ", e.g. " + (units.size() > 4 ? "10gbit or 125MB" : "20us"));
}

// The shortest "<number><unit>" whose parse gives back `value` exactly, the earlier unit on a tie.
template <typename Parse>
std::string shortestSpelling(double value, const std::vector<Unit>& units, Parse parse) {
  std::string best;
  for (const auto& unit : units) {
    const std::string text = shortestNumber(value / unit.scale) + unit.name;
    if (parse(text) == value && (best.empty() || text.size() < best.size())) best = text;
  }
  return best;  // never empty: the unit of scale 1 reads back exactly
}

}  // namespace

double parseBandwidth(const std::string& text, const std::string& what) {
  const double bytes_per_s = scaled(text, what, bandwidthUnits(), "a bandwidth");
  if (bytes_per_s <= 0) {
    throw UserError(what + ": '" + text + "' is not a positive bandwidth; expected e.g. 10gbit, 100mbit or 125MB");
  }
  return bytes_per_s;
}

double parseDuration(const std::string& text, const std::string& what) {
  const double seconds = scaled(text, what, durationUnits(), "a duration");
  if (seconds < 0) throw UserError(what + ": '" + text + "' is negative; expected a latency >= 0, e.g. 20us or 0s");
  return seconds;
}

std::string bandwidthText(double bytes_per_s) {
  return shortestSpelling(bytes_per_s, bandwidthUnits(),
                          [](const std::string& text) { return parseBandwidth(text, "bandwidth"); });
}

std::string durationText(double seconds) {
  return shortestSpelling(seconds, durationUnits(),
                          [](const std::string& text) { return parseDuration(text, "latency"); });
}

}  // namespace gcrun::network
