#pragma once

#include <ostream>
#include <string>

namespace gcrun::outputs {

// A line redrawn in place on a terminal: the console's step line (stdout) and the progress lines
// of long waits (stderr) share these.

// Whether file descriptor `fd` is a terminal.
bool isTerminal(int fd);
// The terminal's width in columns on `fd`; 80 when it does not say. A line wider than the terminal
// wraps, and "\r" then redraws only its last row.
int terminalColumns(int fd);
// Replaces the line under the cursor with `text`; "\033[K" clears what a longer line left.
void redrawLine(std::ostream& out, const std::string& text);
// Clears the line under the cursor and leaves the cursor at its start.
void clearLine(std::ostream& out);

}  // namespace gcrun::outputs
