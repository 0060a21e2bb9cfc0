#include "reducers/planned_bits.h"

#include <map>

#include "reducers/builtin_reducers.h"

namespace gcrun::reducers {

std::optional<uint64_t> plannedBits(const std::string& name, const ReducerOptions& options,
                                    const std::vector<std::vector<int64_t>>& shapes) {
  using Planner = uint64_t (*)(const ReducerOptions&, const TensorShapes&);
  static const std::map<std::string, Planner> planners = {
      {"exact", exactPlannedBits}, {"powersgd", powerSgdPlannedBits}, {"fp16", fp16PlannedBits},
      {"bf16", bf16PlannedBits},   {"fp8", fp8PlannedBits},           {"fp4", fp4PlannedBits},
      {"int8", int8PlannedBits}};
  const auto found = planners.find(name);
  if (found == planners.end()) return std::nullopt;
  return found->second(options, shapes);
}

}  // namespace gcrun::reducers
