#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "hyperparams/base/decimal.h"

namespace gcrun::cli {

// CLI11 reads an integer flag with strtoll(text, 0): "0x10" is 16 and "010" is 8. Checked before
// that conversion, a number flag takes the plain decimal people mean (hyperparams/base/decimal.h).
inline CLI::Validator plainWholeNumber() {
  return CLI::Validator(
      [](std::string& text) {
        return parseWholeNumber(text) ? std::string() : "'" + text + "' is not a whole number in plain decimal";
      },
      "", "plain whole number");
}

}  // namespace gcrun::cli
