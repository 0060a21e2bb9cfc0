// Hostile and careless input, and runs left behind: each is refused with one line (exit 2) or
// handled, and leaves every file of a run as it was.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "hyperparams/base/errors.h"
#include "tasks/idx_reader.h"
#include "tests/support/command.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace gcrun {
namespace {

namespace fs = std::filesystem;
using testing::alive;
using testing::CommandResult;
using testing::contains;
using testing::readFile;
using testing::runCommand;
using testing::startInBackground;
using testing::TempDir;
using testing::waitFor;

const std::string kGcrun = GCRUN_BINARY_PATH;
const std::string kQuick =
    " --set task.synthetic=true --set task.synthetic_samples=2048 --set training.batch_size=32"
    " --set distributed.timeout_s=20 --set output.sinks=[jsonl]";

// A 2-worker fashion-sgd run into `run` that only ends when disturbed, started in the background
// with `settings` added; its launcher logs to `log`.
pid_t startEndlessRun(const std::string& run, const std::string& settings, const std::string& log) {
  return startInBackground(kGcrun + " experiment fashion-sgd --nproc-per-node 2 --output-dir " + run + kQuick +
                               " --set training.epochs=1000" + settings,
                           log);
}

size_t lineCount(const std::string& text) {
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  return lines;
}

void expectRefused(const CommandResult& result, const std::string& part) {
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_EQ(lineCount(result.output), 1u) << result.output;
  EXPECT_TRUE(contains(result.output, part)) << result.output;
}

TEST(InputFaults, ConfigMustBeARegularFile) {
  TempDir dir;
  expectRefused(runCommand(kGcrun + " show fashion-sgd --config " + dir.path().string()), "is not a regular file");
  expectRefused(runCommand(kGcrun + " show fashion-sgd --config /dev/null"), "is not a regular file");
  std::ofstream(dir.file("empty.yaml")).flush();
  EXPECT_EQ(runCommand(kGcrun + " show fashion-sgd --config " + dir.file("empty.yaml")).exit_code, 0);
}

TEST(InputFaults, YamlAliasBombsAreRefusedAtOnceWithAShortLine) {
  TempDir dir;
  // Nine levels of nine aliases each: 387 million values once expanded, in a few hundred bytes.
  std::ofstream bomb(dir.file("bomb.yaml"));
  bomb << "a: &a [x, x, x, x, x, x, x, x, x]\n";
  std::string previous = "a";
  for (const char* level : {"b", "c", "d", "e", "f", "g", "h", "i"}) {
    bomb << level << ": &" << level << " [";
    for (int i = 0; i < 9; ++i) bomb << (i ? ", *" : "*") << previous;
    bomb << "]\n";
    previous = level;
  }
  bomb.close();
  const auto start = std::chrono::steady_clock::now();
  expectRefused(runCommand(kGcrun + " show fashion-sgd --config " + dir.file("bomb.yaml")), "YAML aliases");
  std::string nested = "&l0 [1, 1, 1, 1, 1, 1, 1, 1]";
  for (int level = 1; level <= 6; ++level) {
    const std::string prev = "*l" + std::to_string(level - 1);
    nested = "[" + nested;
    for (int i = 0; i < 7; ++i) nested += ", " + prev;
    nested = "&l" + std::to_string(level) + " " + nested + "]";
  }
  const auto set = runCommand(kGcrun + " show fashion-sgd --set 'optimizer.decay_at_epochs=" + nested + "'");
  EXPECT_EQ(set.exit_code, 2) << set.output.substr(0, 500);
  EXPECT_LT(set.output.size(), 600u) << "the message stays one short line";
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST(InputFaults, UnusableTimeoutsAndDuplicateKeys) {
  TempDir dir;
  expectRefused(runCommand(kGcrun + " show fashion-sgd --set distributed.timeout_s=1e300"), "from 1 to 604800");
  expectRefused(runCommand(kGcrun + " show fashion-sgd --set distributed.timeout_s=1e-9"), "from 1 to 604800");
  std::ofstream(dir.file("twice.yaml")) << "training.epochs: 1\noptimizer.momentum: 0.5\ntraining.epochs: 2\n";
  expectRefused(runCommand(kGcrun + " show fashion-sgd --config " + dir.file("twice.yaml")),
                "training.epochs is given twice");
  std::ofstream(dir.file("alias.yaml")) << "num_epochs: 2\ntraining: {epochs: 3}\n";
  expectRefused(runCommand(kGcrun + " show fashion-sgd --config " + dir.file("alias.yaml")),
                "(as num_epochs and as training.epochs)");
  // --set may still override what a file says.
  std::ofstream(dir.file("once.yaml")) << "training.epochs: 2\n";
  const auto over =
      runCommand(kGcrun + " show fashion-sgd --config " + dir.file("once.yaml") + " --set training.epochs=4");
  EXPECT_TRUE(contains(over.output, "  epochs: 4\n")) << over.output;
}

TEST(InputFaults, TheReferencesSpellingsOfValues) {
  for (const auto& [given, meant] :
       {std::pair<std::string, std::string>{"ResNet18", "resnet18"}, {"VGG16", "vgg16"}, {"LSTM", "lstm"}}) {
    const auto result = runCommand(kGcrun + " show cifar-sgd --set task_architecture=" + given);
    ASSERT_EQ(result.exit_code, 0) << result.output;
    EXPECT_TRUE(contains(result.output, "  architecture: " + meant + "\n")) << result.output;
  }
}

// A gzipped IDX file whose header declares 10 images but whose stream inflates to 256 MiB.
TEST(InputFaults, DecompressionStopsAtWhatTheHeaderDeclares) {
  TempDir dir;
  const std::string path = dir.file("images.gz");
  gzFile out = gzopen(path.c_str(), "wb9");
  const unsigned char header[16] = {0, 0, 8, 3, 0, 0, 0, 10, 0, 0, 0, 28, 0, 0, 0, 28};
  gzwrite(out, header, sizeof(header));
  const std::vector<char> zeros(1 << 20, 0);
  for (int i = 0; i < 256; ++i) gzwrite(out, zeros.data(), static_cast<unsigned>(zeros.size()));
  gzclose(out);
  ASSERT_LT(fs::file_size(path), 2u << 20);
  struct rusage before {
  }, after{};
  ::getrusage(RUSAGE_SELF, &before);
  try {
    tasks::readIdxImages(path);
    FAIL() << "accepted";
  } catch (const UserError& e) {
    EXPECT_TRUE(contains(e.what(), "unexpected bytes after the 7840 bytes")) << e.what();
  }
  ::getrusage(RUSAGE_SELF, &after);
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 64 * 1024) << "KiB more at the peak";
}

// The directory a refused run was given holds its refusal and nothing else.
void expectOnlyRefusal(const std::string& run, const std::string& error_part) {
  std::vector<std::string> entries;
  for (const auto& entry : fs::directory_iterator(run)) entries.push_back(entry.path().filename().string());
  EXPECT_EQ(entries, std::vector<std::string>{"run.json"}) << run;
  const auto info = YAML::LoadFile(run + "/run.json");
  EXPECT_EQ(info["status"].as<std::string>(), "refused");
  EXPECT_TRUE(contains(info["error"].as<std::string>(), error_part)) << info["error"];
}

TEST(InputFaults, BadInputInsideTheWorkersLeavesOnlyItsRefusal) {
  TempDir dir;
  const auto result = runCommand(kGcrun + " experiment fashion-sgd --nproc-per-node 2 --output-dir " + dir.file("run") +
                                 kQuick + " --set training.batch_size=100000");
  expectRefused(result, "training.batch_size = 100000 leaves no full batch");
  expectOnlyRefusal(dir.file("run"), "training.batch_size = 100000 leaves no full batch");
  const auto single = runCommand(kGcrun + " experiment fashion-sgd --output-dir " + dir.file("one") + kQuick +
                                 " --set task.architecture=resnet99");
  expectRefused(single, "resnet99");
  expectOnlyRefusal(dir.file("one"), "resnet99");
}

// A strategy is looked up once, by the launcher, before any worker starts: one refusal, no run.
TEST(InputFaults, AnUnknownSyncStrategyIsRefusedBeforeTheWorkersStart) {
  TempDir dir;
  const auto result = runCommand(kGcrun + " experiment fashion-sgd --nproc-per-node 2 --output-dir " + dir.file("run") +
                                 kQuick + " --set sync.strategy=bogus");
  expectRefused(result, "bogus");
  expectOnlyRefusal(dir.file("run"), "unknown sync strategy 'bogus'");
}

// What a finished run leaves, byte for byte.
std::map<std::string, std::string> runFiles(const std::string& run) {
  std::map<std::string, std::string> files;
  for (const char* name : {"run.json", "config.yaml", "timer_summary.json", "metrics.jsonl"}) {
    files[name] = readFile(run + "/" + name);
  }
  return files;
}

TEST(InputFaults, ResumesThatCannotWorkChangeNothing) {
  TempDir dir;
  const std::string run = dir.file("run");
  const auto first = runCommand(kGcrun + " experiment fashion-powersgd-rank2 --nproc-per-node 2 --output-dir " + run +
                                kQuick + " --set training.max_steps=4");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto before = runFiles(run);

  const auto nothing = runCommand(kGcrun + " experiment fashion-powersgd-rank2 --nproc-per-node 2 --resume " + run);
  EXPECT_EQ(nothing.exit_code, 0) << nothing.output;
  EXPECT_TRUE(contains(nothing.output, "nothing to do")) << nothing.output;
  EXPECT_EQ(runFiles(run), before);

  const auto other = runCommand(kGcrun + " experiment fashion-powersgd-rank2 --nproc-per-node 2 --resume " + run +
                                " --set training.max_steps=8 --set reducer.rank=4");
  expectRefused(other, "reducer.rank is 4 here but 2 in");
  EXPECT_EQ(runFiles(run), before);

  {
    std::fstream corrupt(run + "/checkpoints/rank-1-step-4.pt", std::ios::in | std::ios::out | std::ios::binary);
    corrupt.seekp(100);
    corrupt.put('\x5a');
  }
  const auto bad = runCommand(kGcrun + " experiment fashion-powersgd-rank2 --nproc-per-node 2 --resume " + run +
                              " --set training.max_steps=8");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_TRUE(contains(bad.output, "rank-1-step-4.pt: corrupt checkpoint")) << bad.output;
  EXPECT_EQ(runFiles(run), before) << "rank 0 touched nothing before every rank's checkpoint passed";
}

TEST(InputFaults, ResumeWantsARunDirectory) {
  TempDir dir;
  expectRefused(runCommand(kGcrun + " experiment fashion-sgd --resume " + dir.file("nowhere")), "no such directory");
  expectRefused(runCommand(kGcrun + " experiment fashion-sgd --resume " + dir.path().string()),
                "not a gcrun run directory");
}

TEST(InputFaults, ManifestsNamingOtherPlacesOrNegativeStepsAreRefused) {
  TempDir dir;
  const std::string run = dir.file("run");
  ASSERT_EQ(runCommand(kGcrun + " experiment fashion-sgd --output-dir " + run + kQuick + " --set training.max_steps=2")
                .exit_code,
            0);
  const std::string manifest = run + "/checkpoints/manifest.json";
  const std::string good = readFile(manifest);
  const auto resume = kGcrun + " experiment fashion-sgd --resume " + run + " --set training.max_steps=4";
  auto edited = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    std::ofstream(manifest) << text;
  };
  edited("\"step\": 2", "\"step\": -2");
  expectRefused(runCommand(resume), "step -2 is negative");
  edited("\"rank-0-step-2.pt\"", "\"../rank-0-step-2.pt\"");
  expectRefused(runCommand(resume), "is not a plain file name");
}

TEST(InputFaults, OneRunDirectoryOneGcrunAndNoOrphans) {
  TempDir dir;
  const std::string run = dir.file("run");
  ASSERT_EQ(runCommand(kGcrun + " experiment fashion-sgd --nproc-per-node 2 --output-dir " + run + kQuick +
                       " --set training.max_steps=2")
                .exit_code,
            0);
  // A long resume holds the directory: a second one is refused at once, naming the holder.
  const pid_t launcher = startInBackground(kGcrun + " experiment fashion-sgd --nproc-per-node 2 --resume " + run +
                                               " --set training.max_steps=100000 --set training.epochs=1000",
                                           dir.file("long.log"));
  waitFor([&] { return contains(readFile(run + "/rank-0.log"), "resuming"); }, std::chrono::seconds(60));
  const auto second = runCommand(kGcrun + " experiment fashion-sgd --nproc-per-node 2 --resume " + run +
                                 " --set training.max_steps=100000 --set training.epochs=1000");
  expectRefused(second, "another gcrun (pid " + std::to_string(launcher) + ")");
  // Killing the launcher outright takes its workers with it.
  const auto workers = YAML::LoadFile(run + "/workers.json")["workers"];
  ASSERT_EQ(workers.size(), 2u);
  ::kill(launcher, SIGKILL);
  ::waitpid(launcher, nullptr, 0);
  const auto gone_by = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (const auto& worker : workers) {
    const pid_t pid = worker["pid"].as<pid_t>();
    while (alive(pid) && std::chrono::steady_clock::now() < gone_by) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_FALSE(alive(pid)) << "worker " << pid << " outlived its launcher";
  }
}

// A stopped worker (SIGSTOP) hangs nothing: its peers give up after distributed.timeout_s, name
// it, and the launcher ends within timeout_s + 10 s.
void expectAStoppedRankEndsTheRun(int stopped) {
  TempDir dir;
  const std::string run = dir.file("run");
  const pid_t launcher = startEndlessRun(run, " --set distributed.timeout_s=20", dir.file("launch.log"));
  waitFor([&] { return contains(readFile(run + "/metrics.jsonl"), "accuracy"); }, std::chrono::seconds(60));
  ASSERT_TRUE(fs::exists(run + "/workers.json")) << readFile(dir.file("launch.log"));
  const auto workers = YAML::LoadFile(run + "/workers.json")["workers"];
  const pid_t target = workers[stopped]["pid"].as<pid_t>();
  const auto start = std::chrono::steady_clock::now();
  ::kill(target, SIGSTOP);
  int status = 0;
  while (::waitpid(launcher, &status, WNOHANG) == 0 &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const auto took = std::chrono::steady_clock::now() - start;
  ::kill(target, SIGKILL);
  EXPECT_LT(took, std::chrono::seconds(30)) << readFile(dir.file("launch.log"));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << readFile(dir.file("launch.log"));
  if (stopped == 0) {
    EXPECT_TRUE(contains(readFile(dir.file("launch.log")), "rank 0")) << readFile(dir.file("launch.log"));
  }
}

TEST(StoppedRank, ZeroEndsTheRunWithinTheTimeout) { expectAStoppedRankEndsTheRun(0); }

TEST(StoppedRank, OneEndsTheRunWithinTheTimeout) { expectAStoppedRankEndsTheRun(1); }

// Ctrl-C that reaches one worker only (its own terminal, a scheduler's signal) stops them all at
// one step, and no worker reports the run as done.
TEST(InputFaults, AStopSignalToOneWorkerStopsThemAll) {
  TempDir dir;
  const std::string run = dir.file("run");
  const pid_t launcher = startEndlessRun(run, " --set output.log_every_steps=1", dir.file("launch.log"));
  waitFor([&] { return contains(readFile(run + "/metrics.jsonl"), "window"); }, std::chrono::seconds(60));
  const auto workers = YAML::LoadFile(run + "/workers.json")["workers"];
  ::kill(workers[1]["pid"].as<pid_t>(), SIGINT);
  int status = 0;
  ::waitpid(launcher, &status, 0);
  const std::string log = readFile(dir.file("launch.log"));
  EXPECT_EQ(YAML::LoadFile(run + "/run.json")["status"].as<std::string>(), "interrupted") << log;
  EXPECT_FALSE(contains(log, "done:")) << log;
  EXPECT_TRUE(contains(log, "stopped with a worker that received a stop signal")) << log;
}

// A worker's own failure (here: its checkpoint cannot be written, as on a full disk) is reported
// as it is, not blamed on its peers.
TEST(InputFaults, AWorkersOwnWriteErrorIsReportedAsItIs) {
  TempDir dir;
  const std::string run = dir.file("run");
  const pid_t launcher = startEndlessRun(run, " --set checkpoint.every_steps=20", dir.file("launch.log"));
  waitFor([&] { return fs::exists(run + "/checkpoints/manifest.json"); }, std::chrono::seconds(60));
  fs::remove_all(run + "/checkpoints");
  std::ofstream(run + "/checkpoints") << "not a directory";
  int status = 0;
  ::waitpid(launcher, &status, 0);
  const std::string log = readFile(dir.file("launch.log"));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << log;
  EXPECT_TRUE(contains(log, "checkpoints")) << log;
  EXPECT_FALSE(contains(log, "heartbeat")) << log;
}

TEST(InputFaults, ErrorLinesShowControlCharactersAsEscapesAndValuesWhole) {
  // An escape sequence in an unknown key would clear the screen; a newline in a value would cut
  // the message short.
  const auto key = runCommand(kGcrun + " show fashion-sgd --set '\x1b[2J\x1b]0;title\x07training.x=1'");
  expectRefused(key, "\\x1b[2J\\x1b]0;title\\x07training.x");
  EXPECT_EQ(key.output.find('\x1b'), std::string::npos) << key.output;
  const auto newline = runCommand(kGcrun + " show 'fashion\nsgd (the rest)'");
  expectRefused(newline, "unknown experiment 'fashion\\nsgd (the rest)'");
  const auto c1 = runCommand(kGcrun +
                             " show fashion-sgd --set '\xc2\x9b"
                             "2Jtraining.x=1'");
  expectRefused(c1, "\\u009b2Jtraining.x");
}

TEST(InputFaults, CountFlagsTakePlainDecimalsOnly) {
  // CLI11 alone reads 0x2 as 2 and 010 as 8.
  expectRefused(runCommand(kGcrun + " experiment fashion-sgd --nproc-per-node 0x2"),
                "'0x2' is not a whole number in plain decimal");
  expectRefused(runCommand(kGcrun + " experiment fashion-sgd --nnodes 2 --node-rank 010"),
                "--node-rank: 10 is not below --nnodes 2");
  expectRefused(runCommand(kGcrun + " study fashion-ranks --jobs 0x10 --dry-run"),
                "'0x10' is not a whole number in plain decimal");
}

// A tmpfs of `kib` KiB at `path` (root only: without the rights the test skips).
bool mountSmallDisk(const std::string& path, int kib) {
  fs::create_directories(path);
  return runCommand("mount -t tmpfs -o size=" + std::to_string(kib) + "k gcrun-test " + path).exit_code == 0;
}

// The language-model task's settings and files: checked by the config where a value alone is
// wrong, by the task where settings or data disagree; either way one line and exit 2.
TEST(InputFaults, LanguageModelSettingsAndFilesAreRefusedWithTheirKeyOrFile) {
  TempDir dir;
  std::ofstream(dir.file("wiki.train.tokens")) << "hello world\n";
  std::ofstream(dir.file("wiki.valid.tokens")) << "abc\n";
  const std::string run = kGcrun + " experiment fashion-sgd --output-dir " + dir.file("run") + kQuick +
                          " --set task.name=language-model --set task.architecture=gpt --set training.max_steps=1";
  expectRefused(runCommand(run + " --set task.heads=3"), "task.heads: 3 does not divide task.width 128");
  expectRefused(runCommand(run + " --set task.level=byte"), "task.level");
  expectRefused(runCommand(run + " --set task.dropout=1"), "task.dropout");
  expectRefused(runCommand(run + " --set task.context=500"), "task.context: 500 is longer than");
  expectRefused(runCommand(run + " --set task.synthetic=false --set task.data_dir=" + dir.path().string()),
                "wiki.test.tokens: no such file");
}

TEST(InputFaults, AFullDiskEndsEveryRunAsFailedInGcrunsWords) {
  TempDir dir;
  const std::string disk = dir.file("disk");
  if (::geteuid() != 0 || !mountSmallDisk(disk, 2048)) GTEST_SKIP() << "mounting a small tmpfs needs root";
  // Fills during the first checkpoint of a 2-worker run: the run must not stay `running`.
  const auto full = runCommand(kGcrun + " experiment fashion-sgd --nproc-per-node 2 --output-dir " + disk + "/run" +
                               kQuick + " --set checkpoint.every_steps=5 --set training.max_steps=20");
  EXPECT_EQ(full.exit_code, 1) << full.output;
  EXPECT_FALSE(contains(full.output, "LOG ERROR")) << full.output;
  const std::string info = readFile(disk + "/run/run.json");
  EXPECT_TRUE(contains(info, "\"status\": \"failed\"")) << info << full.output;

  // Full from the start but for three pages: config.yaml (one) and run.json (two: its sources
  // name every key) fit, the log does not. gcrun says so in its own words, once, instead of
  // spdlog's "*** LOG ERROR ***".
  fs::remove_all(disk + "/run");
  std::ofstream(disk + "/filler") << std::string((2048 - 12) << 10, 'x');
  const auto at_start = runCommand(kGcrun + " experiment fashion-sgd --output-dir " + disk + "/run" + kQuick +
                                   " --set training.max_steps=5");
  runCommand("umount " + disk);
  EXPECT_EQ(at_start.exit_code, 1) << at_start.output;
  EXPECT_FALSE(contains(at_start.output, "LOG ERROR")) << at_start.output;
  const auto lines = testing::gcrunLines(at_start.output);
  ASSERT_EQ(lines.size(), 2u) << at_start.output;
  EXPECT_TRUE(contains(lines[0], "gcrun: warning: cannot write " + disk + "/run/rank-0.log")) << at_start.output;
  EXPECT_TRUE(contains(lines[1], "gcrun: failed: cannot write " + disk + "/run/")) << at_start.output;
}

}  // namespace
}  // namespace gcrun
