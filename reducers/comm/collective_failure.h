#pragma once

#include <chrono>
#include <stdexcept>
#include <string>

namespace gcrun::comm {

// What a collective throws when its backend fails it: which rank, and whether it ran out of the
// group's timeout (a peer never came) or failed sooner (most often a peer closed its connection,
// having failed or stopped). The backend's own first line stays in the message, after gcrun's.
class CollectiveFailed : public std::runtime_error {
 public:
  CollectiveFailed(int rank, std::chrono::milliseconds timeout, bool timed_out, const std::string& backend_line);

  int rank() const { return rank_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  bool timedOut() const { return timed_out_; }
  // The backend's line alone, e.g. "[.../gloo/transport/tcp/pair.cc:598] Connection closed by peer".
  const std::string& backendLine() const { return backend_line_; }

 private:
  int rank_;
  std::chrono::milliseconds timeout_;
  bool timed_out_;
  std::string backend_line_;
};

// Whether a collective that failed after `waited` of a group's `timeout` ran out of it: Gloo's
// timeouts say so in varying words ("Timed out waiting", "timed out"), but they all come at the
// timeout, while a lost peer fails the wait at once.
bool ranOutOf(std::chrono::steady_clock::duration waited, std::chrono::milliseconds timeout,
              const std::string& backend_line);

// Seconds as the messages write them: "60 s", "1.5 s".
std::string secondsText(std::chrono::milliseconds duration);

}  // namespace gcrun::comm
