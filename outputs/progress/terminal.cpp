#include "outputs/progress/terminal.h"

#include <sys/ioctl.h>
#include <unistd.h>

namespace gcrun::outputs {

bool isTerminal(int fd) { return ::isatty(fd) == 1; }

int terminalColumns(int fd) {
  winsize size{};
  if (::ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 80;
}

void redrawLine(std::ostream& out, const std::string& text) { out << '\r' << text << "\033[K" << std::flush; }

void clearLine(std::ostream& out) { out << "\r\033[K" << std::flush; }

}  // namespace gcrun::outputs
