#pragma once

#include <string>

namespace gcrun {

// The first line of an error message: LibTorch's and c10d's errors carry a C++ backtrace after it,
// and gcrun's messages are one line each (docs/errors.md).
std::string firstLine(const std::string& text);

// `value` as it may appear inside a one-line message: at most `limit` characters (an ellipsis and
// the total length mark the cut), line breaks shown as \n.
std::string clipForMessage(const std::string& value, size_t limit = 200);

}  // namespace gcrun
