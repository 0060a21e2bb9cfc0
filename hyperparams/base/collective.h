#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gcrun {

// The collectives gcrun's workers take part in: what a reducer declares it sends with
// (reducers::ReducerSpec::collective), what a trace records (trace::Collective::kind), what a
// network profile fits and the step model costs (all but barrier).
enum class CollectiveKind { all_reduce, all_gather, broadcast, barrier };

// "all-reduce", "all-gather", "broadcast", "barrier": the one spelling of files, tables and flags.
std::string collectiveName(CollectiveKind kind);
// The kind `name` spells; nothing for any other text.
std::optional<CollectiveKind> collectiveKindOf(std::string_view name);

}  // namespace gcrun
