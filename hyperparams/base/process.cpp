#include "hyperparams/base/process.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace gcrun::process {
namespace {

std::vector<char*> pointersTo(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (const auto& text : strings) pointers.push_back(const_cast<char*>(text.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

// In the child: only write() and the text of errno that glibc keeps untranslated, in static memory.
[[noreturn]] void failInChild(const std::string& prefix, int error) {
  const char* reason = ::strerrordesc_np(error);
  if (reason == nullptr) reason = "unknown error";
  writeToStderrRaw(prefix.c_str());
  writeToStderrRaw(reason);
  writeToStderrRaw("\n");
  ::_exit(1);
}

}  // namespace

void writeToStderrRaw(const char* text) {
  size_t left = std::strlen(text);
  while (left > 0) {
    const ssize_t written = ::write(STDERR_FILENO, text, left);
    if (written <= 0) return;
    text += written;
    left -= static_cast<size_t>(written);
  }
}

Environment Environment::inherited() {
  Environment environment;
  for (char** variable = environ; *variable != nullptr; ++variable) environment.entries_.emplace_back(*variable);
  return environment;
}

bool Environment::has(const std::string& name) const {
  return std::any_of(entries_.begin(), entries_.end(),
                     [&](const std::string& entry) { return entry.compare(0, name.size() + 1, name + "=") == 0; });
}

void Environment::set(const std::string& name, const std::string& value) {
  unset(name);
  entries_.push_back(name + "=" + value);
}

void Environment::unset(const std::string& name) {
  const std::string prefix = name + "=";
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                [&](const std::string& entry) { return entry.compare(0, prefix.size(), prefix) == 0; }),
                 entries_.end());
}

pid_t spawn(const ChildSpec& child) {
  const auto args = pointersTo(child.argv);
  const auto variables = pointersTo(child.environment.entries());
  const std::string& name = child.argv.empty() ? child.program : child.argv.front();
  const std::string failure = "gcrun: cannot start " + name + ": ";
  const pid_t parent = ::getpid();
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("cannot start " + name + ": fork: " + std::strerror(errno));
  if (pid > 0) return pid;
  if (child.parent_death_signal != 0) {
    ::prctl(PR_SET_PDEATHSIG, child.parent_death_signal);
    if (::getppid() != parent) ::_exit(1);
  }
  if (child.output_fd >= 0 &&
      (::dup2(child.output_fd, STDOUT_FILENO) < 0 || ::dup2(child.output_fd, STDERR_FILENO) < 0)) {
    failInChild(failure, errno);
  }
  if (child.inherited_fd >= 0 && ::fcntl(child.inherited_fd, F_SETFD, 0) != 0) failInChild(failure, errno);
  if (child.working_directory_fd >= 0 && ::fchdir(child.working_directory_fd) != 0) failInChild(failure, errno);
  ::execve(child.program.c_str(), args.data(), variables.data());
  failInChild(failure, errno);
}

int exitCodeOf(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

int waitForExit(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 1;
  }
  return exitCodeOf(status);
}

std::optional<int> exitCodeIfEnded(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, WNOHANG) != pid) return std::nullopt;
  return exitCodeOf(status);
}

std::string currentExecutable() {
  std::error_code error;
  const auto path = std::filesystem::read_symlink(kThisExecutable, error);
  return error ? "gcrun" : path.string();
}

}  // namespace gcrun::process
