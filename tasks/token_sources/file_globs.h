#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace gcrun::tasks {

// At most this many files in one split: far above the ~1,000 shards of llm.c's FineWeb-100B.
inline constexpr size_t kMaxSplitFiles = 4096;

// The files `pattern` names for the setting `key` (task.train_files, say): glob(3) relative to
// `dir` unless `pattern` is absolute (`dir`'s own wildcard characters count as plain characters),
// sorted by bytes so that the order does not depend on the locale. A UserError naming the key and
// the pattern when nothing matches, when more than kMaxSplitFiles do, or when a match is not a
// regular file (a directory, a FIFO, a device).
std::vector<std::string> expandFileGlob(const std::string& key, const std::string& pattern, const std::string& dir);

}  // namespace gcrun::tasks
