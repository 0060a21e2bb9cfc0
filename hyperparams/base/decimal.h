#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace gcrun {

// Numbers as people type them in flags and files: plain decimals such as 16, -0.5 or 2.5e-3.
// strtod, stoi and CLI11 also take hex (0x10), octal (010), inf, nan, leading spaces and a
// leading '+'; every number gcrun reads from a user goes through here instead, so none of those
// becomes a worker count, a size or a bandwidth.

// The length of the plain decimal `text` begins with: an optional '-', digits with an optional
// fraction (at least one digit in all), and an optional exponent (e, an optional sign, digits).
// 0 when `text` begins with none.
size_t decimalLength(std::string_view text);

// All of `text` as a plain decimal, when it is one and a finite double.
std::optional<double> parseDecimal(std::string_view text);

// All of `text` as a whole number (an optional '-', then digits only), when it is one and fits.
std::optional<int64_t> parseWholeNumber(std::string_view text);

}  // namespace gcrun
