#include "reducers/comm/collective_failure.h"

#include <algorithm>
#include <cctype>

#include <spdlog/fmt/fmt.h>

namespace gcrun::comm {
namespace {

std::string describe(int rank, std::chrono::milliseconds timeout, bool timed_out, const std::string& backend_line) {
  const std::string what =
      timed_out ? "timed out after " + secondsText(timeout)
                : "failed before its timeout of " + secondsText(timeout) + " (a peer closed its connection or failed)";
  return "a collective on rank " + std::to_string(rank) + " " + what + " (" + backend_line + ")";
}

bool saysTimedOut(std::string line) {
  std::transform(line.begin(), line.end(), line.begin(), [](unsigned char c) { return std::tolower(c); });
  return line.find("timed out") != std::string::npos || line.find("timeout") != std::string::npos;
}

}  // namespace

CollectiveFailed::CollectiveFailed(int rank, std::chrono::milliseconds timeout, bool timed_out,
                                   const std::string& backend_line)
    : std::runtime_error(describe(rank, timeout, timed_out, backend_line)),
      rank_(rank),
      timeout_(timeout),
      timed_out_(timed_out),
      backend_line_(backend_line) {}

bool ranOutOf(std::chrono::steady_clock::duration waited, std::chrono::milliseconds timeout,
              const std::string& backend_line) {
  // A timeout fires at the deadline, give or take the backend's polling; a tenth spares the margin.
  return saysTimedOut(backend_line) || waited >= timeout - timeout / 10;
}

std::string secondsText(std::chrono::milliseconds duration) {
  return fmt::format("{:g} s", static_cast<double>(duration.count()) / 1000.0);
}

}  // namespace gcrun::comm
