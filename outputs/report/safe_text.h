#pragma once

#include <string>

namespace gcrun::outputs {

// Names, labels and errors in a report come from run directories, which are other people's data:
// each output format gets them only through one of these, so that they stay text there.

// `text` with every byte that is not part of valid UTF-8 replaced by U+FFFD.
std::string validUtf8(const std::string& text);

// validUtf8(text) on one line: control characters (newlines, tabs, escapes, C1) become spaces.
std::string oneLine(const std::string& text);

// A gnuplot string literal: single-quoted (gnuplot expands neither backquotes nor @macros
// there), quotes doubled, on one line (a newline would end the command).
std::string gnuplotString(const std::string& text);

// Text for HTML element content and attribute values.
std::string htmlText(const std::string& text);

// Text for one line of Markdown: one line, raw HTML (renderers pass it through), table cells,
// link text and headings escaped.
std::string markdownText(const std::string& text);

// A CSV field: quoted where needed, and a cell a spreadsheet would run as a formula (starting with
// = + - @, a tab or a carriage return) prefixed with a quote, as OWASP advises. Text cells only:
// numbers gcrun wrote are not passed through this.
std::string csvText(const std::string& text);

}  // namespace gcrun::outputs
