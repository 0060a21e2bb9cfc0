#pragma once

#include <regex>
#include <string>
#include <vector>

namespace gcrun::testing {

// Every value of metric `name` in the text of a run's metrics.jsonl, in the order logged.
inline std::vector<double> metricValues(const std::string& metrics, const std::string& name) {
  std::vector<double> values;
  const std::regex pattern("\"name\": \"" + name + "\", \"value\": ([0-9.e+-]+)");
  for (std::sregex_iterator it(metrics.begin(), metrics.end(), pattern), end; it != end; ++it) {
    values.push_back(std::stod((*it)[1]));
  }
  return values;
}

}  // namespace gcrun::testing
