#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace gcrun::testing {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs a shell command line as a user would and waits for it.
inline CommandResult runCommand(const std::string& command_line) {
  CommandResult result;
  FILE* pipe = ::popen((command_line + " 2>&1").c_str(), "r");
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// The file's bytes, as they are (binary files too).
inline std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Starts a shell command line in its own process group, its stdout and stderr in `log`.
inline pid_t startInBackground(const std::string& command, const std::string& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::execl("/bin/sh", "sh", "-c", ("exec " + command + " > " + log + " 2>&1").c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// Running (a zombie that nobody reaps yet counts as gone).
inline bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_text, name, state;
  return stat >> pid_text >> name >> state && state != "Z";
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Whether Debian's python3 (the PyTorch peer's interpreter) can import `module`: tests against the
// peer skip without it.
inline bool peerPythonHas(const std::string& module) {
  return runCommand("/usr/bin/python3 -c 'import " + module + "'").exit_code == 0;
}

// The lines gcrun itself printed ("gcrun: error: ...", "gcrun: failed: ..."), in order.
inline std::vector<std::string> gcrunLines(const std::string& output) {
  std::vector<std::string> lines;
  std::stringstream stream(output);
  for (std::string line; std::getline(stream, line);) {
    if (line.rfind("gcrun: ", 0) == 0) lines.push_back(line);
  }
  return lines;
}

}  // namespace gcrun::testing
