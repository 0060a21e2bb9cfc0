#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "hyperparams/base/decimal.h"

namespace gcrun {

// CLI11 reads an integer flag with strtoll(text, 0): "0x10" is 16 and "010" is 8. As a transform
// (run before every check and the conversion) a number flag takes the plain decimal people mean
// (hyperparams/base/decimal.h), rewritten without leading zeros. Every integer flag carries it.
inline CLI::Validator plainWholeNumber() {
  return CLI::Validator(
      [](std::string& text) {
        const auto value = parseWholeNumber(text);
        if (!value) return "'" + text + "' is not a whole number in plain decimal";
        text = std::to_string(*value);
        return std::string();
      },
      "", "plain whole number");
}

}  // namespace gcrun
