#include "reducers/planned_bits.h"

#include "reducers/reducer.h"

namespace gcrun::reducers {

std::optional<uint64_t> plannedBits(const std::string& name, const ReducerOptions& options,
                                    const std::vector<std::vector<int64_t>>& shapes) {
  if (!reducerRegistry().contains(name)) return std::nullopt;
  const auto& planned_bits = reducerRegistry().at(name).factory.planned_bits;
  if (!planned_bits) return std::nullopt;
  return planned_bits(options, shapes);
}

std::string plannableReducers() {
  std::string names;
  for (const auto* entry : reducerRegistry().entries()) {
    if (entry->factory.planned_bits) names += (names.empty() ? "" : ", ") + entry->name;
  }
  return names;
}

}  // namespace gcrun::reducers
