#pragma once

#include <string>

#include "hyperparams/base/text.h"

namespace gcrun::outputs {

// Names, labels and errors in a report come from run directories, which are other people's data:
// each output format gets them only through one of these, oneLine and validUtf8
// (hyperparams/base/text.h) or csvField (outputs/csv_field.h), so that they stay text there.

// A gnuplot string literal: single-quoted (gnuplot expands neither backquotes nor @macros
// there), quotes doubled, on one line (a newline would end the command).
std::string gnuplotString(const std::string& text);

// Text for HTML element content and attribute values.
std::string htmlText(const std::string& text);

// Text for one line of Markdown: one line, raw HTML (renderers pass it through), table cells,
// link text and headings escaped.
std::string markdownText(const std::string& text);

}  // namespace gcrun::outputs
