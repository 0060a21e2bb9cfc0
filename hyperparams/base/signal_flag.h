#pragma once

#include <signal.h>

namespace gcrun {

// While one lives, SIGINT and SIGTERM no longer end the process: the signal is recorded and the
// owner polls received() where it can stop cleanly (a worker between steps, the launcher and a
// study between waits for their children). The handler is installed without SA_RESTART, so a
// blocking waitpid() or sleep returns EINTR and the owner sees the signal at once. The handlers in
// place before are restored when it goes. A signal is process-wide, and so is the flag: one
// SignalFlag at a time per process.
class SignalFlag {
 public:
  SignalFlag();  // clears the flag
  ~SignalFlag();
  SignalFlag(const SignalFlag&) = delete;
  SignalFlag& operator=(const SignalFlag&) = delete;

  // The last of SIGINT and SIGTERM received since construction; 0 while none was. Any thread.
  int received() const;

 private:
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
};

}  // namespace gcrun
