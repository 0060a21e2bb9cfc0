#pragma once

#include <string>

namespace gcrun {

// The first line of an error message: LibTorch's and c10d's errors carry a C++ backtrace after it,
// and gcrun's messages are one line each (docs/errors.md).
std::string firstLine(const std::string& text);

// `text` on one line, the one policy for every line gcrun writes from other people's text (messages,
// the console, reports, YAML comments, CSV rows read line by line): line breaks, tabs and other
// control characters (C0, DEL, C1) and bytes that are not UTF-8 shown as escapes (\n, \x1b,
// \u009b), so that a value from a file or a flag can neither split a line nor drive a terminal.
// The result is valid UTF-8.
std::string oneLine(const std::string& text);

// `text` with every byte that is not part of valid UTF-8 replaced by U+FFFD, line breaks kept (for
// formats that hold several lines: HTML, a quoted CSV cell).
std::string validUtf8(const std::string& text);

// `value` as it may appear inside a one-line message: oneLine of at most `limit` characters
// (an ellipsis and the total length mark the cut).
std::string clipForMessage(const std::string& value, size_t limit = 200);

}  // namespace gcrun
