#include "hyperparams/base/collective.h"

#include <stdexcept>

namespace gcrun {

std::string collectiveName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::all_reduce:
      return "all-reduce";
    case CollectiveKind::all_gather:
      return "all-gather";
    case CollectiveKind::broadcast:
      return "broadcast";
    case CollectiveKind::barrier:
      return "barrier";
  }
  throw std::logic_error("unknown collective kind");
}

std::optional<CollectiveKind> collectiveKindOf(std::string_view name) {
  for (const auto kind :
       {CollectiveKind::all_reduce, CollectiveKind::all_gather, CollectiveKind::broadcast, CollectiveKind::barrier}) {
    if (name == collectiveName(kind)) return kind;
  }
  return std::nullopt;
}

}  // namespace gcrun
