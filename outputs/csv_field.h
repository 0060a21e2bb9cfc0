#pragma once

#include <string>

namespace gcrun::outputs {

// A text cell of gcrun's CSV files (epochs.csv, layers.csv, report.csv, predict.csv), the one CSV
// policy: valid UTF-8, quoted (its quotes doubled) when it holds a comma, a quote or a line break,
// and a cell a spreadsheet would run as a formula (starting with = + - @, a tab or a carriage
// return, or holding a carriage return) prefixed with a quote, as OWASP advises. Text cells only:
// numbers gcrun writes go in as they are (-0.5 stays a number).
std::string csvField(const std::string& text);

// A cell's text as csvField was given it, from the cell with its quoting undone: without the
// formula guard's quote.
std::string csvFieldText(const std::string& cell);

}  // namespace gcrun::outputs
