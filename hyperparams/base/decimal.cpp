#include "hyperparams/base/decimal.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

namespace gcrun {
namespace {

bool isDigit(char c) { return c >= '0' && c <= '9'; }

size_t digitsFrom(std::string_view text, size_t at) {
  size_t end = at;
  while (end < text.size() && isDigit(text[end])) ++end;
  return end - at;
}

}  // namespace

size_t decimalLength(std::string_view text) {
  size_t at = !text.empty() && text[0] == '-' ? 1 : 0;
  const size_t whole = digitsFrom(text, at);
  at += whole;
  size_t fraction = 0;
  if (at < text.size() && text[at] == '.') {
    fraction = digitsFrom(text, at + 1);
    if (whole + fraction > 0) at += 1 + fraction;
  }
  if (whole + fraction == 0) return 0;
  if (at < text.size() && (text[at] == 'e' || text[at] == 'E')) {
    size_t exponent = at + 1;
    if (exponent < text.size() && (text[exponent] == '-' || text[exponent] == '+')) ++exponent;
    const size_t digits = digitsFrom(text, exponent);
    if (digits > 0) at = exponent + digits;
  }
  return at;
}

std::optional<double> parseDecimal(std::string_view text) {
  if (text.empty() || decimalLength(text) != text.size()) return std::nullopt;
  const double value = std::strtod(std::string(text).c_str(), nullptr);
  if (!std::isfinite(value)) return std::nullopt;
  return value;
}

std::optional<int64_t> parseWholeNumber(std::string_view text) {
  const size_t sign = !text.empty() && text[0] == '-' ? 1 : 0;
  if (text.size() == sign || digitsFrom(text, sign) != text.size() - sign) return std::nullopt;
  errno = 0;
  const long long value = std::strtoll(std::string(text).c_str(), nullptr, 10);
  if (errno == ERANGE) return std::nullopt;
  return value;
}

}  // namespace gcrun
