#include "tasks/task.h"

namespace gcrun::tasks {

void MetricSums::merge(const MetricSums& other) {
  for (const auto& [name, sum] : other.sums) sums[name] += sum;
  weight += other.weight;
}

std::map<std::string, double> MetricSums::means() const {
  std::map<std::string, double> out;
  if (weight == 0) return out;
  for (const auto& [name, sum] : sums) out[name] = sum / weight;
  return out;
}

}  // namespace gcrun::tasks
