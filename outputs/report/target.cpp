#include "outputs/report/target.h"

#include <cmath>
#include <regex>

#include "hyperparams/base/errors.h"

namespace gcrun::outputs {

bool lowerIsBetter(const std::string& metric) {
  return metric.find("loss") != std::string::npos || metric.find("perplexity") != std::string::npos;
}

Target parseTarget(const std::string& text, const std::string& what) {
  static const std::regex form(R"(([A-Za-z0-9_]+\.[A-Za-z0-9_.]+)=([-+0-9.eE]+))");
  std::smatch match;
  if (std::regex_match(text, match, form)) {
    try {
      size_t used = 0;
      const double value = std::stod(match[2].str(), &used);
      if (used == match[2].str().size() && std::isfinite(value)) {
        const auto metric = match[1].str();
        return {metric, value, lowerIsBetter(metric)};
      }
    } catch (const std::exception&) {
      // not a number: the error below names the form
    }
  }
  throw UserError(what + ": '" + text + "' is not METRIC=VALUE, e.g. test.accuracy=0.9 or validation.perplexity=150");
}

std::optional<EpochPoint> reachedAt(const RunData& run, const Target& target) {
  if (run.metric != target.metric) return std::nullopt;
  for (const auto& point : run.epochs) {
    if (target.lower_is_better ? point.metric <= target.value : point.metric >= target.value) return point;
  }
  return std::nullopt;
}

}  // namespace gcrun::outputs
