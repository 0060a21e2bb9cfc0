#include "outputs/report/safe_text.h"

namespace gcrun::outputs {

std::string gnuplotString(const std::string& text) {
  std::string out = "'";
  for (char c : oneLine(text)) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::string htmlText(const std::string& text) {
  std::string out;
  for (char c : validUtf8(text)) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string markdownText(const std::string& text) {
  std::string out;
  for (char c : oneLine(text)) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '|':
      case '[':
      case ']':
      case '\\':
      case '#':  // table cells, links, headings
        out += '\\';
        out += c;
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace gcrun::outputs
