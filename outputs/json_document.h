#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

// The JSON files gcrun writes and reads (run.json, timer_summary.json, metrics.jsonl, manifest.json,
// workers.json, study.json, ...), built and parsed with nlohmann::json. Included by .cpp files only.
namespace gcrun::outputs {

// Keys keep the order they were added in, which is the order the files list them.
using Json = nlohmann::ordered_json;

// `value` as gcrun lays its files out: containers nested fewer than `open_levels` deep hold one
// item per line (indented two spaces a level); deeper ones, and arrays of plain values, stay on one
// line as {"key": value, ...}. Numbers print as jsonNumber does (NaN and infinities as null);
// invalid UTF-8 in a string becomes U+FFFD. No trailing newline.
std::string jsonText(const Json& value, int open_levels = 0);

// Containers nested deeper than this are refused: gcrun's own files nest a few levels, and
// readers and writers may recurse once per level.
constexpr size_t kMaxJsonDepth = 64;

// The document in `text`, or nothing when it is not strict JSON (a file cut short, someone else's
// file), has a key twice in one object, or nests deeper than kMaxJsonDepth; `why` then says which.
// Time and memory are linear in the text's size, whatever its objects hold.
std::optional<Json> parseJson(std::string_view text, std::string* why = nullptr);

// Reading a document someone else may have written: a missing key or a value of another type
// gives the fallback, never an exception.
const Json* memberOf(const Json& object, const char* key);
std::string stringOr(const Json& object, const char* key, const std::string& fallback);
// A finite number; NaN, infinities and null are missing.
std::optional<double> numberAt(const Json& object, const char* key);
int64_t integerOr(const Json& object, const char* key, int64_t fallback);
bool boolOr(const Json& object, const char* key, bool fallback);

}  // namespace gcrun::outputs
