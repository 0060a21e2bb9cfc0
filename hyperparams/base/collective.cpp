#include "hyperparams/base/collective.h"

#include <stdexcept>

namespace gcrun {
namespace {

constexpr DataType kDataTypes[] = {DataType::float32, DataType::float16, DataType::bfloat16,
                                   DataType::float64, DataType::uint8,   DataType::int8,
                                   DataType::int32,   DataType::int64,   DataType::bool_};

}  // namespace

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

std::string dataTypeName(DataType type) {
  switch (type) {
    case DataType::float32:
      return "float32";
    case DataType::float16:
      return "float16";
    case DataType::bfloat16:
      return "bfloat16";
    case DataType::float64:
      return "float64";
    case DataType::uint8:
      return "uint8";
    case DataType::int8:
      return "int8";
    case DataType::int32:
      return "int32";
    case DataType::int64:
      return "int64";
    case DataType::bool_:
      return "bool";
  }
  throw std::logic_error("unknown data type");
}

std::optional<DataType> dataTypeOf(std::string_view name) {
  for (const auto type : kDataTypes) {
    if (name == dataTypeName(type)) return type;
  }
  return std::nullopt;
}

std::string dataTypeNames() {
  std::string names;
  for (const auto type : kDataTypes) names += (names.empty() ? "" : ", ") + dataTypeName(type);
  return names;
}

}  // namespace gcrun
