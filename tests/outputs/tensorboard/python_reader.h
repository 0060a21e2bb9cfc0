#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "tests/support/command.h"

namespace gcrun::testing {

// tests/outputs/tensorboard/read_tfevents.py, run by Debian's python3: the one its
// python3-protobuf and python3-crc32c packages install into (a pyenv or venv python3 first on the
// PATH would not see them).
inline constexpr char kDebianPython[] = "/usr/bin/python3";

// The reader's result; `skip` says why it could not run (no python3, no python3-protobuf).
struct ReaderResult {
  CommandResult command;
  std::string skip;
};

inline ReaderResult runEventReader(const std::string& arguments) {
  ReaderResult result;
  if (::access(kDebianPython, X_OK) != 0) {
    result.skip = std::string(kDebianPython) + " is missing";
    return result;
  }
  result.command = runCommand(std::string(kDebianPython) + " " + GCRUN_TFEVENTS_READER + " " + arguments);
  if (result.command.exit_code == 77) result.skip = "python3-protobuf is missing (apt-get install python3-protobuf)";
  return result;
}

}  // namespace gcrun::testing
