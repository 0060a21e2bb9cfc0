#pragma once

#include <string>

#include "outputs/json_document.h"

namespace gcrun::outputs {

// A JSON string literal (quoted, escaped), for files a test writes by hand.
inline std::string jsonString(const std::string& s) { return jsonText(Json(s)); }

}  // namespace gcrun::outputs
