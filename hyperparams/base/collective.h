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

// The element type of a collective's tensor: what a trace records (trace::Collective::dtype) and
// what a network profile's fit was timed in (network::Fit::dtype). A reduction's cost depends on it
// (Gloo sums float16 in software, several times slower per byte than float32); moving bytes does not.
enum class DataType { float32, float16, bfloat16, float64, uint8, int8, int32, int64, bool_ };

// "float32", "float16", "bfloat16", "float64", "uint8", "int8", "int32", "int64", "bool": the one
// spelling of files, tables and flags.
std::string dataTypeName(DataType type);
// The type `name` spells; nothing for any other text.
std::optional<DataType> dataTypeOf(std::string_view name);
// Every name dataTypeOf accepts, comma-separated, for messages.
std::string dataTypeNames();

}  // namespace gcrun
