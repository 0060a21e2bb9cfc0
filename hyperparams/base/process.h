#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

// Child processes, for every part of gcrun that starts one: the launcher's workers, a study's runs
// and the report's gnuplot. It lives in base/ rather than experiments/launch/ because the report
// (outputs/) starts gnuplot and outputs/ may not depend on experiments/.
namespace gcrun::process {

// The environment a child gets, built in full before it is started.
class Environment {
 public:
  // This process's own variables, as exec would pass them on.
  static Environment inherited();

  bool has(const std::string& name) const;
  void set(const std::string& name, const std::string& value);
  void unset(const std::string& name);
  const std::vector<std::string>& entries() const { return entries_; }  // NAME=value

 private:
  std::vector<std::string> entries_;
};

// What a child is started with.
struct ChildSpec {
  std::string program;            // the file to execute; not searched for on PATH
  std::vector<std::string> argv;  // argv[0] first
  Environment environment;
  // Sent to the child when this process dies, even by SIGKILL (PR_SET_PDEATHSIG); 0: none. A
  // parent that died before the child could ask for it is noticed, and the child exits 1.
  int parent_death_signal = 0;
  int output_fd = -1;             // the child's stdout and stderr; -1: this process's
  int inherited_fd = -1;          // kept open in the child although opened close-on-exec; -1: none
  int working_directory_fd = -1;  // the child's working directory; -1: this process's
};

// Starts `child` and returns its pid. Everything it needs is built before fork: this process may
// have threads, and a lock that one of them holds at fork (malloc's, stdio's) stays held in the
// child forever, so between fork and exec the child makes only async-signal-safe system calls.
// Buffered output of this process is flushed first, so that it precedes the child's. When the
// child cannot set itself up or exec, it writes "gcrun: cannot start ARGV0: REASON" to its stderr
// (output_fd when given) and exits 1. Throws std::runtime_error naming argv[0] when fork fails.
pid_t spawn(const ChildSpec& child);

// Writes `text` whole to stderr with write(2) alone: async-signal-safe, for a child between fork
// and exec and for signal handlers, where stdio's locks may be held. A failed write gives up.
void writeToStderrRaw(const char* text);

// The exit code a shell would report for a waitpid() status: the code, or 128 + the signal.
int exitCodeOf(int wait_status);

// Waits for `pid` to end (through EINTR) and returns its exit code; 1 when it cannot be waited for.
int waitForExit(pid_t pid);

// The exit code of `pid` if it has ended (it is reaped), nullopt while it runs.
std::optional<int> exitCodeIfEnded(pid_t pid);

// The running executable, for a child that runs it again: executed through this link, it is the
// same file even if the one at its path was replaced since.
inline constexpr char kThisExecutable[] = "/proc/self/exe";

// The path of the running executable, for argv[0] and for command lines written to run later;
// "gcrun" when /proc/self/exe cannot be read.
std::string currentExecutable();

}  // namespace gcrun::process
