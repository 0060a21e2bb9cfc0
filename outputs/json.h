#pragma once

#include <string>

namespace gcrun::outputs {

// A JSON string literal (quoted, escaped).
std::string jsonString(const std::string& s);
// A JSON number; NaN and infinities, which JSON lacks, become null.
std::string jsonNumber(double value);

}  // namespace gcrun::outputs
