#pragma once

#include <string>
#include <vector>

#include "experiments/bench/reducer_benchmark.h"

namespace gcrun::experiments {

// The table `gcrun bench reducers` prints row by row, all at once.
inline std::string formatBenchmarkTable(const std::vector<ReducerBenchmarkRow>& rows) {
  std::string out = formatBenchmarkHeader();
  for (const auto& row : rows) out += formatBenchmarkRow(row);
  return out;
}

}  // namespace gcrun::experiments
