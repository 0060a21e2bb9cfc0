#include "hyperparams/base/baseline.h"

#include <stdexcept>

namespace gcrun {

std::string baselineName(Baseline baseline) {
  switch (baseline) {
    case Baseline::none:
      return "none";
    case Baseline::full_precision:
      return "full-precision";
    case Baseline::half_precision:
      return "half-precision";
  }
  throw std::logic_error("unknown baseline");
}

std::optional<Baseline> baselineOf(std::string_view name) {
  for (const auto baseline : {Baseline::none, Baseline::full_precision, Baseline::half_precision}) {
    if (name == baselineName(baseline)) return baseline;
  }
  return std::nullopt;
}

}  // namespace gcrun
