#include "outputs/report/safe_text.h"

namespace gcrun::outputs {

std::string gnuplotString(const std::string& text) {
  std::string out = "'";
  for (char c : oneLine(text)) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

namespace {

// HTML's entity for `c` where it has one that matters (markup, attribute quotes); null otherwise.
const char* htmlEntity(char c) {
  switch (c) {
    case '<':
      return "&lt;";
    case '>':
      return "&gt;";
    case '&':
      return "&amp;";
    case '"':
      return "&quot;";
    case '\'':
      return "&#39;";
    default:
      return nullptr;
  }
}

}  // namespace

std::string htmlText(const std::string& text) {
  std::string out;
  for (char c : validUtf8(text)) {
    const char* entity = htmlEntity(c);
    if (entity) {
      out += entity;
    } else {
      out += c;
    }
  }
  return out;
}

// Markdown renders HTML, so the same entities; then the characters that make table cells, links and
// headings, backslash-escaped.
std::string markdownText(const std::string& text) {
  std::string out;
  for (char c : oneLine(text)) {
    const char* entity = c == '"' || c == '\'' ? nullptr : htmlEntity(c);
    if (entity) {
      out += entity;
    } else if (c == '|' || c == '[' || c == ']' || c == '\\' || c == '#') {
      out += '\\';
      out += c;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace gcrun::outputs
