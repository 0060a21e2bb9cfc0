#pragma once

#include <string>

namespace gcrun::outputs {

// Text as one field of gcrun's CSV files (epochs.csv, layers.csv): quoted, its quotes doubled, when
// it holds a comma, a quote or a newline; names are identifiers in practice.
inline std::string csvField(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace gcrun::outputs
