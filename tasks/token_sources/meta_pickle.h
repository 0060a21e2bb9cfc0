#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gcrun::tasks {

// meta.pkl is small (nanoGPT's char datasets: a few kilobytes); a larger one is not nanoGPT's.
inline constexpr size_t kMaxMetaPickleBytes = size_t{16} << 20;

// The `vocab_size` of a pickled dict (nanoGPT's meta.pkl: {'vocab_size': int, 'itos': {int: str},
// 'stoi': {str: int}}), or nullopt when the dict has no such integer. Reads only what such a
// dict is made of in pickle protocols 2 to 5 (dicts, lists, tuples, strings, bytes, integers,
// floats, None, booleans, the memo), builds no object, calls nothing; any other opcode, a value
// past the end, or a top level that is not a dict is a UserError naming `source`.
std::optional<int64_t> pickledVocabularySize(std::string_view pickle, const std::string& source);

// The same for the file `path`, read bounded (kMaxMetaPickleBytes); nullopt when it does not exist.
std::optional<int64_t> metaPickleVocabularySize(const std::string& path);

}  // namespace gcrun::tasks
