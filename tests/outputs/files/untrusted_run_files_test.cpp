// The gcrun binary on run directories, checkpoints, configs and plugins that someone else prepared
// (docs/security.md): a planted symlink is never written through, a device, FIFO or directory
// where a file belongs is refused at once with one line and exit 2, and a failing plugin or a
// thread limit ends in one line instead of an abort.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "tests/support/command.h"
#include "tests/support/refusal.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using gcrun::testing::contains;
using gcrun::testing::expectRefused;
using gcrun::testing::gcrunLines;
using gcrun::testing::readFile;
using gcrun::testing::runCommand;
using gcrun::testing::TempDir;

const std::string kGcrun = GCRUN_BINARY_PATH;
// Every command has a time limit: a FIFO that is waited on would otherwise hang the suite.
const std::string kLimit = "timeout 120 ";
const std::string kQuick =
    " --set task.synthetic=true --set training.batch_size=32 --set task.test_batch_size=500"
    " --set output.sinks=[jsonl,csv] --set distributed.timeout_s=20";

void writeFile(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// A finished two-step run with a checkpoint, made once; each test resumes a copy of it.
class HostileRunDirectory : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    suite_dir_ = new TempDir;
    const auto made = runCommand(kLimit + kGcrun + " experiment fashion-sgd --output-dir " + suite_dir_->file("run") +
                                 kQuick + " --set training.max_steps=2");
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }
  static void TearDownTestSuite() {
    delete suite_dir_;
    suite_dir_ = nullptr;
  }

  void SetUp() override {
    fs::copy(suite_dir_->file("run"), run_, fs::copy_options::recursive);
    writeFile(victim_, "not gcrun's to write\n");
  }

  gcrun::testing::CommandResult resume() const {
    return runCommand(kLimit + kGcrun + " experiment fashion-sgd --resume " + run_ + " --set training.max_steps=4");
  }
  // Replaces the run's `name` by a symlink to the victim file outside the run.
  void plantLink(const std::string& name) const {
    fs::remove(run_ + "/" + name);
    fs::create_symlink(victim_, run_ + "/" + name);
  }
  void expectVictimUntouched() const { EXPECT_EQ(readFile(victim_), "not gcrun's to write\n"); }

  static TempDir* suite_dir_;
  TempDir dir_;
  const std::string run_ = dir_.file("run");
  const std::string victim_ = dir_.file("victim");
};

TempDir* HostileRunDirectory::suite_dir_ = nullptr;

TEST_F(HostileRunDirectory, AResumeWithoutPlantsStillWorks) {
  const auto resumed = resume();
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_TRUE(contains(readFile(run_ + "/metrics.jsonl"), "\"step\": 4")) << readFile(run_ + "/metrics.jsonl");
}

TEST_F(HostileRunDirectory, ALockFileSymlinkIsRefusedBeforeItsTargetIsTouched) {
  plantLink(".gcrun.lock");
  expectRefused(resume(), ".gcrun.lock is a symlink");
  expectVictimUntouched();
}

TEST_F(HostileRunDirectory, AppendsToRunFilesDoNotFollowSymlinks) {
  for (const std::string name : {"metrics.jsonl", "epochs.csv", "rank-0.log"}) {
    SCOPED_TRACE(name);
    const std::string saved = dir_.file("saved-" + name);
    fs::copy_file(run_ + "/" + name, saved);
    plantLink(name);
    expectRefused(resume(), name + " is a symlink");
    expectVictimUntouched();
    fs::remove(run_ + "/" + name);
    fs::copy_file(saved, run_ + "/" + name);
  }
}

TEST_F(HostileRunDirectory, ACheckpointsSymlinkIsRefusedAndTheFolderItPointsToKeepsItsFiles) {
  const std::string elsewhere = dir_.file("elsewhere");
  fs::rename(run_ + "/checkpoints", elsewhere);
  writeFile(elsewhere + "/rank-0-step-1.pt", "someone else's file\n");
  fs::create_symlink(elsewhere, run_ + "/checkpoints");
  expectRefused(resume(), "checkpoints is a symlink");
  EXPECT_EQ(readFile(elsewhere + "/rank-0-step-1.pt"), "someone else's file\n");
  EXPECT_TRUE(fs::exists(elsewhere + "/rank-0-step-2.pt"));
  EXPECT_FALSE(fs::exists(elsewhere + "/rank-0-step-4.pt"));
}

TEST_F(HostileRunDirectory, CheckpointsThatAreNoRegularFilesAreRefusedAtOnce) {
  const std::string file = run_ + "/checkpoints/rank-0-step-2.pt";
  const std::string saved = dir_.file("saved.pt");
  fs::rename(file, saved);
  fs::create_directory(file);
  expectRefused(resume(), "rank-0-step-2.pt is not a regular file");
  fs::remove(file);
  // An endless file and one that would block its reader forever.
  fs::create_symlink("/dev/zero", file);
  expectRefused(resume(), "rank-0-step-2.pt is not a regular file");
  fs::remove(file);
  ASSERT_EQ(::mkfifo(file.c_str(), 0644), 0);
  expectRefused(resume(), "rank-0-step-2.pt is not a regular file");
  fs::remove(file);
  // Larger than its manifest says: refused before it is read.
  fs::copy_file(saved, file);
  std::ofstream(file, std::ios::app | std::ios::binary) << std::string(1 << 20, 'x');
  expectRefused(resume(), "rank-0-step-2.pt");
}

TEST_F(HostileRunDirectory, AManifestThatIsADeviceIsRefused) {
  fs::remove(run_ + "/checkpoints/manifest.json");
  fs::create_symlink("/dev/zero", run_ + "/checkpoints/manifest.json");
  expectRefused(resume(), "manifest.json is not a regular file");
}

TEST(HostileInputs, ConfigFilesAreBoundedAndNeverWaitedOn) {
  TempDir dir;
  const std::string fifo = dir.file("settings.yaml");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  expectRefused(runCommand(kLimit + kGcrun + " show fashion-sgd --config " + fifo), "is not a regular file");
  expectRefused(runCommand(kLimit + kGcrun + " show fashion-sgd --config /dev/zero"), "is not a regular file");
  const std::string huge = dir.file("huge.yaml");
  writeFile(huge, "description: '" + std::string(2 << 20, 'x') + "'\n");
  expectRefused(runCommand(kLimit + kGcrun + " show fashion-sgd --config " + huge), "bytes, more than the");
}

TEST(HostileInputs, APluginThatThrowsIsNamedInOneLine) {
  for (const std::string plugin : {GCRUN_THROWING_PLUGIN_PATH, GCRUN_THROWING_INT_PLUGIN_PATH}) {
    const auto result = runCommand(kGcrun + " list reducers --plugin " + plugin);
    expectRefused(result, plugin + ": gcrun_register failed");
  }
  EXPECT_TRUE(contains(runCommand(kGcrun + " list reducers --plugin " + std::string(GCRUN_THROWING_PLUGIN_PATH)).output,
                       "the plugin's own failure"));
  TempDir dir;
  expectRefused(runCommand(kGcrun + " list reducers --plugin " + dir.path().string()), "is a directory");
}

// Each thread's stack is reserved address space: with 1 GiB stacks under a 24 GiB cap, a few
// dozen simulated workers cannot all start.
TEST(HostileInputs, ThreadsThatCannotStartEndInOneLine) {
  TempDir dir;
  const auto result = runCommand("ulimit -s 1048576 && ulimit -v 25165824 && " + kLimit + kGcrun +
                                 " experiment fashion-sgd --output-dir " + dir.file("run") + kQuick +
                                 " --set training.max_steps=1 --set distributed.simulated_workers=64");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  const auto lines = gcrunLines(result.output);
  ASSERT_EQ(lines.size(), 1u) << result.output;
  EXPECT_TRUE(contains(lines.front(), "of 64 for distributed.simulated_workers=64")) << result.output;
  EXPECT_FALSE(contains(result.output, "terminate called")) << result.output;
}

}  // namespace
