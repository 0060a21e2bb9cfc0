// Child processes (hyperparams/base/process.h): what a child gets is what was built for it before
// fork, and its end is reported as a shell would.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "hyperparams/base/process.h"
#include "hyperparams/base/signal_flag.h"
#include "tests/support/temp_dir.h"

namespace gcrun::process {
namespace {

using testing::TempDir;

std::string contentsOf(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

ChildSpec shell(const std::string& script) {
  ChildSpec child;
  child.program = "/bin/sh";
  child.argv = {"sh", "-c", script};
  child.environment = Environment::inherited();
  return child;
}

TEST(Process, TheChildGetsItsEnvironmentOutputAndWorkingDirectory) {
  TempDir dir;
  auto child = shell("echo \"$GCRUN_TEST_VALUE\"; pwd; echo to-stderr >&2; test -z \"$GCRUN_TEST_GONE\"");
  child.environment.set("GCRUN_TEST_VALUE", "a value with spaces=and equals");
  child.environment.set("GCRUN_TEST_GONE", "set");
  child.environment.unset("GCRUN_TEST_GONE");
  const int log = ::open(dir.file("log").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  const int work = ::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  child.output_fd = log;
  child.working_directory_fd = work;
  EXPECT_EQ(waitForExit(spawn(child)), 0);
  ::close(log);
  ::close(work);
  char real[4096];
  ASSERT_NE(::realpath(dir.path().c_str(), real), nullptr);
  EXPECT_EQ(contentsOf(dir.file("log")), "a value with spaces=and equals\n" + std::string(real) + "\nto-stderr\n");
}

TEST(Process, OnlyTheInheritedDescriptorStaysOpen) {
  const int kept = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int closed = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  auto child =
      shell("test -e /proc/self/fd/" + std::to_string(kept) + " && ! test -e /proc/self/fd/" + std::to_string(closed));
  child.inherited_fd = kept;
  EXPECT_EQ(waitForExit(spawn(child)), 0);
  ::close(kept);
  ::close(closed);
}

TEST(Process, ExitCodesAreAShellsAndAMissingProgramIsNamed) {
  EXPECT_EQ(waitForExit(spawn(shell("exit 3"))), 3);
  EXPECT_EQ(waitForExit(spawn(shell("kill -TERM $$"))), 128 + SIGTERM);
  const pid_t running = spawn(shell("sleep 0.2"));
  EXPECT_FALSE(exitCodeIfEnded(running).has_value());
  EXPECT_EQ(waitForExit(running), 0);

  TempDir dir;
  ChildSpec missing;
  missing.program = dir.file("no-such-program");
  missing.argv = {"no-such-program"};
  const int log = ::open(dir.file("log").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  missing.output_fd = log;
  EXPECT_EQ(waitForExit(spawn(missing)), 1);
  ::close(log);
  EXPECT_EQ(contentsOf(dir.file("log")), "gcrun: cannot start no-such-program: No such file or directory\n");
}

TEST(SignalFlag, ASignalIsRecordedWhileOneLivesAndEndsTheProcessAfter) {
  {
    const SignalFlag flag;
    EXPECT_EQ(flag.received(), 0);
    ::raise(SIGTERM);
    EXPECT_EQ(flag.received(), SIGTERM);
  }
  EXPECT_EXIT(::raise(SIGINT), ::testing::KilledBySignal(SIGINT), "");
}

}  // namespace
}  // namespace gcrun::process
