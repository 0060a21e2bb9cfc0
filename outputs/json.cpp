#include "outputs/json.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace gcrun::outputs {

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  out.reserve(s.size() + 2);
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(c));
          out += escaped;
        } else {
          out += c;  // UTF-8 multi-byte sequences are valid JSON as they are
        }
    }
  }
  out += '"';
  return out;
}

std::string jsonNumber(double value) {
  if (!std::isfinite(value)) return "null";
  // Integers that a double holds exactly print as integers (bit counts, steps), never as 1e+15.
  constexpr double kExactIntegerLimit = 9007199254740992.0;  // 2^53
  if (value == std::trunc(value) && std::fabs(value) < kExactIntegerLimit) {
    return std::to_string(static_cast<int64_t>(value));
  }
  // Shortest text that parses back to the same double; independent of the C locale.
  char buffer[32];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

}  // namespace gcrun::outputs
