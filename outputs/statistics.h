#pragma once

#include <algorithm>
#include <vector>

namespace gcrun::outputs {

// The middle value (the mean of the two middle ones for an even count); 0 for none. Timings are
// reported as medians: one slow step (a page fault, a noisy neighbour) does not move them.
inline double median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(middle), values.end());
  const double upper = values[middle];
  if (values.size() % 2 == 1) return upper;
  return (*std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(middle)) + upper) / 2;
}

}  // namespace gcrun::outputs
