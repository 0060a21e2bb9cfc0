#include "hyperparams/base/text.h"

namespace gcrun {

std::string firstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

std::string clipForMessage(const std::string& value, size_t limit) {
  std::string out;
  for (const char c : value.substr(0, limit)) out += c == '\n' ? std::string("\\n") : std::string(1, c);
  if (value.size() > limit) out += "... (" + std::to_string(value.size()) + " characters)";
  return out;
}

}  // namespace gcrun
