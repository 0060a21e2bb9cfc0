#pragma once

#include <string>

namespace gcrun::outputs {

// A number as gcrun writes it in JSON and CSV: integers without a fraction, the shortest text that
// reads back as the same double otherwise; NaN and infinities, which JSON lacks, become null.
std::string jsonNumber(double value);

}  // namespace gcrun::outputs
