#include "outputs/json.h"

#include <charconv>
#include <cmath>
#include <unordered_set>
#include <utility>
#include <vector>

#include "outputs/json_document.h"

namespace gcrun::outputs {
namespace {

std::string scalarText(const Json& value) {
  if (value.is_number_float()) return jsonNumber(value.get<double>());
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

bool isPlainArray(const Json& value) {
  if (!value.is_array()) return false;
  for (const auto& item : value) {
    if (item.is_structured()) return false;
  }
  return true;
}

void write(const Json& value, int level, int open_levels, std::string& out) {
  if (!value.is_structured()) {
    out += scalarText(value);
    return;
  }
  const bool object = value.is_object();
  out += object ? '{' : '[';
  if (value.empty()) {
    out += object ? '}' : ']';
    return;
  }
  const bool open = level < open_levels && !isPlainArray(value);
  const std::string indent = open ? "\n" + std::string(2 * (level + 1), ' ') : "";
  bool first = true;
  for (auto it = value.begin(); it != value.end(); ++it) {
    out += first ? indent : "," + (open ? indent : std::string(" "));
    first = false;
    if (object) out += scalarText(Json(it.key())) + ": ";
    write(*it, level + 1, open_levels, out);
  }
  if (open) out += "\n" + std::string(2 * level, ' ');
  out += object ? '}' : ']';
}

const Json* numberOrNull(const Json& object, const char* key) {
  const Json* member = memberOf(object, key);
  return member && member->is_number() ? member : nullptr;
}

// Builds a document as nlohmann's own DOM parser does, but appends each key instead of searching
// the object for it (the ordered type's insert is a linear search, so a file of n distinct keys
// would parse in n² time). Duplicate keys are refused, found through a hash set per open object;
// so is nesting past kMaxJsonDepth.
class LinearDocumentBuilder {
 public:
  explicit LinearDocumentBuilder(Json& root) : root_(root) {}

  bool null() { return add(nullptr); }
  bool boolean(bool value) { return add(value); }
  bool number_integer(Json::number_integer_t value) { return add(value); }
  bool number_unsigned(Json::number_unsigned_t value) { return add(value); }
  bool number_float(Json::number_float_t value, const std::string&) { return add(value); }
  bool string(std::string& value) { return add(std::move(value)); }
  bool binary(Json::binary_t& value) { return add(std::move(value)); }
  bool start_object(std::size_t) { return open(Json::value_t::object); }
  bool start_array(std::size_t) { return open(Json::value_t::array); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(std::string& name) {
    if (!open_.back().keys.insert(name).second) return refuse("the key " + scalarText(Json(name)) + " appears twice");
    auto& object = open_.back().value->get_ref<Json::object_t&>();
    object.emplace_back(std::move(name), nullptr);
    next_member_ = &object.back().second;
    return true;
  }
  template <class Exception>
  bool parse_error(std::size_t, const std::string&, const Exception& error) {
    return refuse(error.what());
  }

  const std::string& error() const { return error_; }

 private:
  struct Open {
    Json* value;
    std::unordered_set<std::string> keys;  // an object's keys so far
  };

  bool refuse(std::string why) {
    error_ = std::move(why);
    return false;
  }
  template <class Value>
  bool add(Value&& value) {
    place(Json(std::forward<Value>(value)));
    return true;
  }
  Json* place(Json value) {
    if (open_.empty()) return &(root_ = std::move(value));
    Json& parent = *open_.back().value;
    if (parent.is_array()) {
      auto& items = parent.get_ref<Json::array_t&>();
      items.push_back(std::move(value));
      return &items.back();
    }
    *next_member_ = std::move(value);
    return next_member_;
  }
  bool open(Json::value_t type) {
    if (open_.size() >= kMaxJsonDepth) return refuse("nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    open_.push_back({place(Json(type)), {}});
    return true;
  }
  bool close() {
    open_.pop_back();
    return true;
  }

  Json& root_;
  std::vector<Open> open_;
  Json* next_member_ = nullptr;
  std::string error_;
};

}  // namespace

std::string jsonNumber(double value) {
  if (!std::isfinite(value)) return "null";
  // Integers that a double holds exactly print as integers (bit counts, steps), never as 1e+15.
  constexpr double kExactIntegerLimit = 9007199254740992.0;  // 2^53
  if (value == std::trunc(value) && std::fabs(value) < kExactIntegerLimit) {
    return std::to_string(static_cast<int64_t>(value));
  }
  // Shortest text that parses back to the same double; independent of the C locale.
  char buffer[32];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

std::string jsonText(const Json& value, int open_levels) {
  std::string out;
  write(value, 0, open_levels, out);
  return out;
}

std::optional<Json> parseJson(std::string_view text, std::string* why) {
  Json parsed;
  LinearDocumentBuilder builder(parsed);
  if (!Json::sax_parse(text.begin(), text.end(), &builder)) {
    if (why) *why = builder.error();
    return std::nullopt;
  }
  return parsed;
}

const Json* memberOf(const Json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto found = object.find(key);
  return found == object.end() ? nullptr : &*found;
}

std::string stringOr(const Json& object, const char* key, const std::string& fallback) {
  const Json* member = memberOf(object, key);
  return member && member->is_string() ? member->get<std::string>() : fallback;
}

std::optional<double> numberAt(const Json& object, const char* key) {
  const Json* member = numberOrNull(object, key);
  if (!member) return std::nullopt;
  const double value = member->get<double>();
  return std::isfinite(value) ? std::optional<double>(value) : std::nullopt;
}

int64_t integerOr(const Json& object, const char* key, int64_t fallback) {
  const Json* member = numberOrNull(object, key);
  if (!member) return fallback;
  if (member->is_number_integer()) return member->get<int64_t>();
  const double value = member->get<double>();
  // A whole number written as 2.0 counts; anything else is not a count.
  constexpr double kLimit = 9.2e18;
  return value == std::trunc(value) && std::fabs(value) < kLimit ? static_cast<int64_t>(value) : fallback;
}

bool boolOr(const Json& object, const char* key, bool fallback) {
  const Json* member = memberOf(object, key);
  return member && member->is_boolean() ? member->get<bool>() : fallback;
}

}  // namespace gcrun::outputs
