#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace gcrun::network {

// The shortest decimal that reads back as exactly `value` (network.yaml's numbers and units).
inline std::string shortestNumber(double value) {
  char buffer[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  return buffer;
}

}  // namespace gcrun::network
