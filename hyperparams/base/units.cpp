#include "hyperparams/base/units.h"

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include <spdlog/fmt/fmt.h>

#include "hyperparams/base/decimal.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"

namespace gcrun::units {
namespace {

// number * multiply / divide: both exact in a double, so that "20us" is the double nearest 2e-5.
struct Unit {
  const char* name;
  double multiply;
  double divide;
  double apply(double number) const { return number * multiply / divide; }
};

// Decimal, then binary, each largest first.
const std::vector<Unit>& byteUnits() {
  static const std::vector<Unit> units = {{"GB", 1e9, 1},      {"MB", 1e6, 1},      {"KB", 1e3, 1}, {"GiB", 1 << 30, 1},
                                          {"MiB", 1 << 20, 1}, {"KiB", 1 << 10, 1}, {"B", 1, 1}};
  return units;
}

// Bit rates first: where a bit and a byte spelling are as short, the bit rate is the usual one.
const std::vector<Unit>& bandwidthUnits() {
  static const std::vector<Unit> units = [] {
    std::vector<Unit> all = {{"gbit", 1e9, 8}, {"mbit", 1e6, 8}, {"kbit", 1e3, 8}, {"bit", 1, 8}};
    all.insert(all.end(), byteUnits().begin(), byteUnits().end());
    return all;
  }();
  return units;
}
constexpr size_t kBitRateUnits = 4;  // the first bandwidthUnits()

const std::vector<Unit>& durationUnits() {
  static const std::vector<Unit> units = {{"s", 1, 1}, {"ms", 1, 1e3}, {"us", 1, 1e6}, {"ns", 1, 1e9}};
  return units;
}

std::string unitNames(const std::vector<Unit>& units) {
  std::string names;
  for (const auto& unit : units) names += (names.empty() ? "" : ", ") + std::string(unit.name);
  return names;
}

// The number in front and the unit after it; false when the text does not begin with a plain
// decimal number.
bool splitQuantity(const std::string& text, double& number, std::string& unit) {
  const size_t length = decimalLength(text);
  const auto parsed = parseDecimal(std::string_view(text).substr(0, length));
  if (!parsed) return false;
  number = *parsed;
  unit = text.substr(length);
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
  const std::string quoted = "'" + clipForMessage(text, 60) + "'";
  if (!splitQuantity(text, number, unit)) throw UserError(what + ": " + quoted + " is not " + accepted);
  for (const auto& known : units) {
    if (sameUnit(unit, known.name)) return known.apply(number);
  }
  throw UserError(what + ": " + quoted + " has " +
                  (unit.empty() ? "no unit" : "an unknown unit '" + clipForMessage(unit, 60) + "'") + "; expected " +
                  accepted + ", e.g. " + (units.size() > 4 ? "10gbit or 125MB" : "20us"));
}

// The shortest "<number><unit>" whose parse gives back `value` exactly, the earlier unit on a tie.
// Both %g and %f spellings compete: %g writes 20 as "2e+01".
std::string shortestSpelling(double value, const std::vector<Unit>& units) {
  std::string best;
  char number[64];
  for (const auto& unit : units) {
    const double scaled = value * unit.divide / unit.multiply;
    for (const char* format : {"%.*g", "%.*f"}) {
      for (int precision = 0; precision <= 17; ++precision) {
        std::snprintf(number, sizeof(number), format, precision, scaled);
        if (unit.apply(std::strtod(number, nullptr)) != value) continue;
        const std::string text = number + std::string(unit.name);
        if (best.empty() || text.size() < best.size()) best = text;
        break;
      }
    }
  }
  // The units of one (B, s) read back exactly at 17 digits: best is never empty.
  return best;
}

}  // namespace

double parseBandwidth(const std::string& text, const std::string& what) {
  const double bytes_per_s = scaled(text, what, bandwidthUnits(), "a bandwidth");
  if (!(bytes_per_s >= kMinBandwidth && bytes_per_s <= kMaxBandwidth)) {
    throw UserError(what + ": '" + clipForMessage(text, 60) +
                    "' is not a bandwidth from 1bit to 1000000gbit (1 Pbit/s); e.g. 10gbit, 100mbit or 125MB");
  }
  return bytes_per_s;
}

double parseDuration(const std::string& text, const std::string& what) {
  const double seconds = scaled(text, what, durationUnits(), "a duration");
  if (!(seconds >= 0 && seconds <= kMaxLatency)) {
    throw UserError(what + ": '" + clipForMessage(text, 60) + "' is not a latency from 0s to 1000s; e.g. 20us or 0s");
  }
  return seconds;
}

// Links are named in bits per second, a whole number where one unit gives it ("100mbit", not
// "0.1gbit" or "12.5MB"), unless that is much longer than the shortest spelling ("1GiB", not
// "8589934592bit"); a whole number of bits may be a little longer ("200mbit", not "25MB").
std::string bandwidthText(double bytes_per_s) {
  std::string in_bits;
  for (size_t k = 0; k < kBitRateUnits; ++k) {
    const auto text = shortestSpelling(bytes_per_s, {bandwidthUnits()[k]});
    const bool whole = text.find_first_of(".e") == std::string::npos;
    const bool best_whole = !in_bits.empty() && in_bits.find_first_of(".e") == std::string::npos;
    if (in_bits.empty() || (whole && !best_whole) || (whole == best_whole && text.size() < in_bits.size())) {
      in_bits = text;
    }
  }
  const bool whole_bits = in_bits.find_first_of(".e") == std::string::npos;
  const auto any = shortestSpelling(bytes_per_s, bandwidthUnits());
  return in_bits.size() <= any.size() + (whole_bits ? 4 : 2) ? in_bits : any;
}

std::string durationText(double seconds) { return shortestSpelling(seconds, durationUnits()); }

std::string mibText(double mib) { return fmt::format("{:.1f} MiB", mib); }

std::optional<int64_t> parseByteCount(const std::string& text) {
  const size_t length = decimalLength(text);
  const auto number = parseWholeNumber(std::string_view(text).substr(0, length));
  const std::string unit = text.substr(length);
  if (!number) return std::nullopt;
  if (unit.empty()) return number;
  for (const auto& known : byteUnits()) {
    if (unit != known.name) continue;
    const auto scale = static_cast<int64_t>(known.multiply);
    if (*number > std::numeric_limits<int64_t>::max() / scale ||
        *number < std::numeric_limits<int64_t>::min() / scale) {
      return std::nullopt;
    }
    return *number * scale;
  }
  return std::nullopt;
}

std::string byteCountText(int64_t bytes) {
  for (const auto& unit : byteUnits()) {
    const auto scale = static_cast<int64_t>(unit.multiply);
    if (unit.name[1] == 'i' && bytes % scale == 0 && bytes != 0) return std::to_string(bytes / scale) + unit.name;
  }
  return std::to_string(bytes);
}

std::string roughBandwidthText(double bytes_per_s) {
  const double bits = bytes_per_s * 8;
  if (bits >= 1e9) return fmt::format("{:.3g} gbit/s", bits / 1e9);
  if (bits >= 1e6) return fmt::format("{:.3g} mbit/s", bits / 1e6);
  return fmt::format("{:.3g} kbit/s", bits / 1e3);
}

std::string roughDurationText(double seconds) {
  if (seconds >= 1e-3) return fmt::format("{:.3g} ms", seconds * 1e3);
  return fmt::format("{:.3g} us", seconds * 1e6);
}

std::string elapsedText(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto total = static_cast<int64_t>(std::llround(seconds));
  if (total < 60) return fmt::format("{}s", total);
  if (total < 3600) return fmt::format("{}m{:02d}s", total / 60, total % 60);
  return fmt::format("{}h{:02d}m", total / 3600, (total % 3600) / 60);
}

double unixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace gcrun::units
