#include "outputs/csv_field.h"

#include "hyperparams/base/text.h"

namespace gcrun::outputs {
namespace {

bool startsAFormula(const std::string& text) {
  return !text.empty() && (text.find_first_of("=+-@\t\r") == 0 || text.find('\r') != std::string::npos);
}

}  // namespace

std::string csvField(const std::string& raw) {
  std::string text = validUtf8(raw);
  const bool formula = startsAFormula(text);
  if (formula) text = "'" + text;
  if (!formula && text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string csvFieldText(const std::string& cell) {
  const bool guarded = cell.size() > 1 && cell[0] == '\'' && startsAFormula(cell.substr(1));
  return guarded ? cell.substr(1) : cell;
}

}  // namespace gcrun::outputs
