#pragma once

#include <string>

namespace gcrun {

// The first line of an error message: LibTorch's and c10d's errors carry a C++ backtrace after it,
// and gcrun's messages are one line each (docs/errors.md).
std::string firstLine(const std::string& text);

// `text` safe to print on a terminal as one line: line breaks, tabs and other control characters
// (C0, DEL, C1) and bytes that are not UTF-8 shown as escapes (\n, \x1b, \u009b), so that a value
// from a file or a flag can neither split a message nor drive the terminal.
std::string printableText(const std::string& text);

// `value` as it may appear inside a one-line message: printableText of at most `limit` characters
// (an ellipsis and the total length mark the cut).
std::string clipForMessage(const std::string& value, size_t limit = 200);

}  // namespace gcrun
