// gcrun study with study files and study directories from other people, through the binary: what
// they hold is data. A name never becomes a line of slurm.sbatch, a folder the study did not make
// is never deleted, a huge plan or a YAML bomb is refused at once, runs that would share a
// directory are refused at planning, and nothing planted in the study directory is written through.
// `study --status` reads a crafted study.json in bounded time and memory, each run once.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "tests/support/command.h"
#include "tests/support/temp_dir.h"

namespace gcrun {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::contains;
using testing::readFile;
using testing::runCommand;
using testing::TempDir;

const std::string kGcrun = GCRUN_BINARY_PATH;

// One configuration of two synthetic steps: seconds, when it runs at all.
const char kOneRun[] =
    "base: fashion-sgd\n"
    "set: {task.synthetic: true, task.synthetic_samples: 512, training.max_steps: 2}\n"
    "runs:\n  - {name: sgd}\n";

std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string write(const TempDir& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir.file(name)) << text;
  return dir.file(name);
}

CommandResult study(const std::string& file, const std::string& output_dir, const std::string& flags = "") {
  return runCommand(kGcrun + " study " + quoted(file) + " --output-dir " + quoted(output_dir) + " " + flags);
}

// Exit 2 and exactly one line, gcrun's error line, that names `part`.
void expectRefused(const CommandResult& result, const std::string& part) {
  EXPECT_EQ(result.exit_code, 2) << result.output;
  std::istringstream lines(result.output);
  size_t count = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("study ", 0) == 0) continue;  // the plan's own progress line, printed before the refusal
    ++count;
    EXPECT_EQ(line.rfind("gcrun: error: ", 0), 0u) << result.output;
  }
  EXPECT_EQ(count, 1u) << result.output;
  EXPECT_TRUE(contains(result.output, part)) << "expected '" << part << "' in: " << result.output;
}

// --- slurm.sbatch (issue 20, item 3) ---

// Runs `script` as Slurm would run array task 3, with a fake srun that records its arguments, one
// per line, in `args`; in `cwd`, where a line that escaped its quoting would leave `pwned`.
CommandResult runSbatch(const TempDir& dir, const std::string& script, const std::string& cwd) {
  fs::create_directories(dir.file("fakebin"));
  write(dir, "fakebin/srun",
        "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > " + quoted(dir.file("args")) + "\n");
  fs::permissions(dir.file("fakebin/srun"), fs::perms::owner_all);
  return runCommand("cd " + quoted(cwd) + " && PATH=" + quoted(dir.file("fakebin")) +
                    ":$PATH SLURM_ARRAY_TASK_ID=3 bash " + quoted(script));
}

TEST(HostileStudy, ANewlineInTheStudyNameOrDirectoryIsRefusedAndEverythingElseIsQuoted) {
  TempDir dir;
  // A newline would put `touch pwned` on a line of its own in a comment or an #SBATCH line.
  const auto newline_file = write(dir, "s\ntouch pwned\n.yaml", kOneRun);
  expectRefused(study(newline_file, dir.file("out"), "--slurm"), "newline");
  const auto plain_file = write(dir, "plain.yaml", kOneRun);
  expectRefused(study(plain_file, dir.file("out\ntouch pwned\n"), "--slurm"), "newline");
  expectRefused(study(plain_file, dir.file("out\rx"), "--slurm"), "control character");
  EXPECT_FALSE(fs::exists(dir.file("out/slurm.sbatch")));
  EXPECT_FALSE(fs::exists(dir.file("out\ntouch pwned\n/slurm.sbatch")));

  // Quotes, $() and ; in names that can be quoted: they reach srun as they are, and run nothing.
  const auto odd_file = write(dir, "it's $(touch pwned); `touch pwned`.yaml", kOneRun);
  const std::string odd_dir = dir.file("o'ut$(touch${IFS}pwned)\"`touch${IFS}pwned`\"");
  const std::string odd_set = "task.data_dir=x'$(touch pwned)\"; touch pwned";
  const auto written = study(odd_file, odd_dir, "--slurm --set " + quoted(odd_set));
  ASSERT_EQ(written.exit_code, 0) << written.output;
  const std::string script = odd_dir + "/slurm.sbatch";
  EXPECT_EQ(runCommand("bash -n " + quoted(script)).exit_code, 0) << readFile(script);
  const auto ran = runSbatch(dir, script, dir.path().string());
  EXPECT_EQ(ran.exit_code, 0) << ran.output << readFile(script);
  EXPECT_FALSE(fs::exists(dir.file("pwned"))) << readFile(script);
  std::vector<std::string> args;
  std::ifstream in(dir.file("args"));
  for (std::string line; std::getline(in, line);) args.push_back(line);
  // gcrun study --only 3 --set=SET --output-dir=DIR --jobs=1 -- FILE (studyArguments)
  ASSERT_EQ(args.size(), 9u) << readFile(dir.file("args"));
  EXPECT_EQ(args[1], "study");
  EXPECT_EQ(args[2], "--only");
  EXPECT_EQ(args[3], "3");
  EXPECT_EQ(args[4], "--set=" + odd_set);
  EXPECT_EQ(args[5], "--output-dir=" + odd_dir);
  EXPECT_EQ(args[7], "--");
  EXPECT_EQ(args[8], odd_file);
}

// --- folders the study did not make (item 4) ---

TEST(HostileStudy, AFolderWithoutARunOfTheStudyIsNeverDeleted) {
  TempDir dir;
  const auto file = write(dir, "study.yaml", kOneRun);
  fs::create_directories(dir.file("out/runs/sgd-seed1/thesis"));
  write(dir, "out/runs/sgd-seed1/thesis/chapter1.tex", "precious");
  expectRefused(study(file, dir.file("out")), "runs/sgd-seed1 holds files but no run of this study");
  EXPECT_EQ(readFile(dir.file("out/runs/sgd-seed1/thesis/chapter1.tex")), "precious");

  // A run.json that is not one, or one of another configuration, proves nothing either.
  write(dir, "out/runs/sgd-seed1/run.json", "{\"status\": ");
  expectRefused(study(file, dir.file("out")), "runs/sgd-seed1 holds files but no run of this study");
  write(dir, "out/runs/sgd-seed1/run.json", "{\"status\": \"failed\"}");
  write(dir, "out/runs/sgd-seed1/config.yaml", "seed: 1\n");
  expectRefused(study(file, dir.file("out")), "other settings");
  // Nor does a marker the study wrote for another run.
  fs::remove(dir.file("out/runs/sgd-seed1/run.json"));
  write(dir, "out/runs/sgd-seed1/.gcrun-study-run",
        "{\"study\": \"study\", \"run\": \"other-seed1\", \"config\": \"other\"}\n");
  expectRefused(study(file, dir.file("out")), "runs/sgd-seed1 holds files but no run of this study");
  EXPECT_EQ(readFile(dir.file("out/runs/sgd-seed1/thesis/chapter1.tex")), "precious");

  // A symlink there is not followed, nor removed.
  fs::create_directories(dir.file("elsewhere"));
  write(dir, "elsewhere/keep", "keep");
  fs::remove_all(dir.file("out/runs/sgd-seed1"));
  fs::create_directory_symlink(dir.file("elsewhere"), dir.file("out/runs/sgd-seed1"));
  expectRefused(study(file, dir.file("out")), "runs/sgd-seed1 is not a directory");
  EXPECT_EQ(readFile(dir.file("elsewhere/keep")), "keep");
}

TEST(HostileStudy, ARunDirectoryTheStudyMadeIsClearedAndRunAgain) {
  TempDir dir;
  // The run fails at once (its batch is larger than the data set) and leaves its directory.
  const auto file = write(dir, "study.yaml",
                          "base: fashion-sgd\nset: {task.synthetic: true, task.synthetic_samples: 512}\n"
                          "runs:\n  - {name: broken, set: {training.batch_size: 100000}}\n");
  const auto first = study(file, dir.file("out"));
  ASSERT_EQ(first.exit_code, 1) << first.output;
  ASSERT_TRUE(fs::is_regular_file(dir.file("out/runs/broken-seed1/.gcrun-study-run"))) << first.output;
  write(dir, "out/runs/broken-seed1/partial.bin", "left by the failed run");
  const auto again = study(file, dir.file("out"));
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_TRUE(contains(again.output, "1 of 1 runs did not complete: broken-seed1")) << again.output;
  EXPECT_FALSE(fs::exists(dir.file("out/runs/broken-seed1/partial.bin")));
}

// --- plans too large to build, YAML bombs, files that are not files (item 6) ---

// A grid of `keys` keys with ten values each.
std::string gridStudy(int keys) {
  std::string yaml = "base: fashion-powersgd-rank2\ngrid:\n";
  const char* names[] = {"training.lr",         "training.momentum",  "training.weight_decay",
                         "training.batch_size", "reducer.rank",       "seed",
                         "training.epochs",     "training.max_steps", "task.synthetic_samples"};
  for (int k = 0; k < keys; ++k) {
    yaml += std::string("  ") + names[k] + ": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n";
  }
  return yaml;
}

// The binary under 3 GiB of data (heap and anonymous memory; not the libraries' code, which a CUDA
// LibTorch maps by the gigabyte) and 20 s: a plan built in memory would break either.
CommandResult bounded(const std::string& command) { return runCommand("ulimit -d 3145728 && timeout 20 " + command); }

TEST(HostileStudy, APlanOfMillionsOfRunsIsRefusedAtOnceWithItsCount) {
  TempDir dir;
  for (const auto& [keys, count] : {std::pair<int, std::string>{9, "1000000000"}, {6, "1000000"}}) {
    const auto file = write(dir, "grid.yaml", gridStudy(keys));
    const auto start = std::chrono::steady_clock::now();
    const auto result = bounded(kGcrun + " study " + file + " --dry-run");
    expectRefused(result, "up to " + count + " runs");
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  }
  // Seeds multiply too, and 10^5 runs is the limit.
  std::string seeds = "base: fashion-sgd\nruns:\n  - {name: a}\nseeds: [";
  for (int s = 0; s < 1001; ++s) seeds += (s ? ", " : "") + std::to_string(s);
  write(dir, "seeds.yaml",
        seeds +
            "]\ngrid: {training.lr: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, "
            "23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, "
            "49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, "
            "75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99]}\n");
  expectRefused(bounded(kGcrun + " study " + dir.file("seeds.yaml") + " --dry-run"),
                "up to 100100 runs (100 configurations x 1001 seeds)");
}

TEST(HostileStudy, AYamlBombOrAFileThatIsNoStudyFileIsRefused) {
  TempDir dir;
  // Nine levels of ten aliases: a billion values in a few hundred bytes.
  std::string bomb = "base: fashion-sgd\nset:\n  a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int level = 1; level < 9; ++level) {
    const std::string previous = "*a" + std::to_string(level - 1);
    bomb += "  a" + std::to_string(level) + ": &a" + std::to_string(level) + " [";
    for (int i = 0; i < 10; ++i) bomb += (i ? ", " : "") + previous;
    bomb += "]\n";
  }
  expectRefused(bounded(kGcrun + " study " + write(dir, "bomb.yaml", bomb) + " --dry-run"),
                "more than 10000 values once its YAML aliases are expanded");

  // Larger than a study file can be (1 MiB), though mostly comments.
  std::string huge = kOneRun;
  while (huge.size() <= (1u << 20)) huge += "# " + std::string(1000, 'c') + "\n";
  expectRefused(bounded(kGcrun + " study " + write(dir, "huge.yaml", huge) + " --dry-run"), "more than the 1048576");
  ASSERT_EQ(::mkfifo(dir.file("fifo.yaml").c_str(), 0644), 0);
  expectRefused(bounded(kGcrun + " study " + dir.file("fifo.yaml") + " --dry-run"), "not a regular file");
  expectRefused(bounded(kGcrun + " study /dev/zero --dry-run"), "not a regular file");
}

// --- runs that would collide (item 7) ---

TEST(HostileStudy, RunsThatWouldShareADirectoryAreRefusedAtPlanning) {
  TempDir dir;
  const auto plan = [&](const std::string& yaml) {
    return runCommand(kGcrun + " study " + write(dir, "study.yaml", yaml) + " --dry-run");
  };
  expectRefused(plan("base: fashion-sgd\nruns: [{name: a/b}, {name: a_b}]\n"),
                "configurations 'a/b' and 'a_b' would both run in runs/a_b-seed<k>");
  expectRefused(plan("base: fashion-sgd\nseeds: [1, 2, 1]\n"), "seed 1 is listed twice");
  // yaml-cpp keeps the first of two equal keys: a study says which it means.
  expectRefused(plan("base: fashion-sgd\nseeds: [1]\nbase: fashion-powersgd-rank2\n"), "key 'base' is given twice");
  expectRefused(plan("base: fashion-sgd\nruns:\n  - {name: a, preset: fashion-sgd, preset: fashion-powersgd-rank2}\n"),
                "run 'a': key 'preset' is given twice");
  expectRefused(plan("base: fashion-powersgd-rank2\ngrid: {reducer.rank: [1], reducer.rank: [2]}\n"),
                "key 'reducer.rank' is given twice");
  expectRefused(plan("base: fashion-sgd\nset: {training: {epochs: 1}, training.epochs: 2}\n"),
                "`set` gives 'training.epochs' twice");
  // logs/<name>-seed1.log must fit in a file name (255 bytes).
  EXPECT_EQ(plan("base: fashion-sgd\nruns: [{name: " + std::string(245, 'x') + "}]\n").exit_code, 0);
  expectRefused(plan("base: fashion-sgd\nruns: [{name: " + std::string(246, 'x') + "}]\n"), "has a name of 252 bytes");
}

// --- what is planted in the study directory (item 9) ---

TEST(HostileStudy, AStudyJsonSlurmScriptOrLogThatIsADirectoryIsRefusedByName) {
  TempDir dir;
  const auto file = write(dir, "study.yaml", kOneRun);
  fs::create_directories(dir.file("out/study.json/inside"));
  expectRefused(study(file, dir.file("out")), dir.file("out/study.json") + " is a directory");
  EXPECT_FALSE(fs::exists(dir.file("out/runs/sgd-seed1")));
  fs::create_directories(dir.file("out/slurm.sbatch/inside"));
  expectRefused(study(file, dir.file("out"), "--slurm"), dir.file("out/slurm.sbatch") + " is a directory");
  // A run's log, opened before the run starts: not left to the child to fail on quietly.
  fs::remove_all(dir.file("out"));
  fs::create_directories(dir.file("out/logs/sgd-seed1.log/inside"));
  expectRefused(study(file, dir.file("out")), dir.file("out/logs/sgd-seed1.log") + " is a directory");
  EXPECT_FALSE(fs::exists(dir.file("out/runs/sgd-seed1/run.json")));
}

TEST(HostileStudy, SymlinksPlantedInTheStudyDirectoryAreNotFollowed) {
  TempDir dir;
  const auto file = write(dir, "study.yaml", kOneRun);
  fs::create_directories(dir.file("elsewhere"));
  const auto nothing_elsewhere = [&] { return fs::is_empty(dir.file("elsewhere")); };
  for (const char* planted : {"logs", "runs", "configs"}) {
    fs::remove_all(dir.file("out"));
    fs::create_directories(dir.file("out"));
    fs::create_directory_symlink(dir.file("elsewhere"), dir.file(std::string("out/") + planted));
    expectRefused(study(file, dir.file("out")), dir.file(std::string("out/") + planted) + " is a symlink");
    EXPECT_TRUE(nothing_elsewhere()) << planted;
  }
  fs::remove_all(dir.file("out"));
  fs::create_directories(dir.file("out/logs"));
  write(dir, "elsewhere/victim", "untouched");
  fs::create_symlink(dir.file("elsewhere/victim"), dir.file("out/logs/sgd-seed1.log"));
  expectRefused(study(file, dir.file("out")), dir.file("out/logs/sgd-seed1.log") + " is a symlink");
  EXPECT_EQ(readFile(dir.file("elsewhere/victim")), "untouched");
  EXPECT_FALSE(fs::exists(dir.file("out/runs/sgd-seed1/run.json")));

  fs::remove_all(dir.file("out"));
  fs::create_directories(dir.file("out"));
  fs::create_symlink(dir.file("elsewhere/lock"), dir.file("out/study.lock"));
  expectRefused(study(file, dir.file("out")), dir.file("out/study.lock") + " is a symlink");
  EXPECT_FALSE(fs::exists(dir.file("elsewhere/lock")));
}

TEST(HostileStudy, ASymlinkPlantedAtStudyJsonIsReplacedNotWrittenThrough) {
  TempDir dir;
  const auto file = write(dir, "study.yaml", kOneRun);
  fs::create_directories(dir.file("out"));
  write(dir, "victim.json", "untouched");
  fs::create_symlink(dir.file("victim.json"), dir.file("out/study.json"));
  const auto result = study(file, dir.file("out"));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(readFile(dir.file("victim.json")), "untouched");
  EXPECT_FALSE(fs::is_symlink(dir.file("out/study.json")));
}

// --- study --status on a crafted study directory (issue 30, items 4, 7 and 10) ---

// `runs` as study.json's array (text between the brackets), in a study directory `out`.
std::string studyDirectory(const TempDir& dir, const std::string& runs) {
  fs::create_directories(dir.file("out/runs"));
  write(dir, "out/study.json", "{\"study\": \"s\", \"runs\": [" + runs + "]}\n");
  return dir.file("out");
}

void writeRunJson(const TempDir& dir, const std::string& run, const std::string& members) {
  fs::create_directories(dir.file("out/runs/" + run));
  write(dir, "out/runs/" + run + "/run.json", "{\"experiment\": \"fashion-sgd\", " + members + "}\n");
}

std::vector<std::string> linesOf(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(HostileStudy, StatusReadsEachRunOnceAndListsItsErrorOnOneClippedLine) {
  TempDir dir;
  // 1 MiB of error after a newline and a terminal escape, named 20,000 times: 20 GB if each entry
  // kept its own copy.
  writeRunJson(dir, "a-seed1",
               "\"status\": \"failed\", \"error\": \"boom\\n\\u001b[2J" + std::string(1 << 20, 'x') + "\"");
  std::string runs;
  for (int i = 0; i < 20000; ++i)
    runs += std::string(i ? ", " : "") + "{\"dir\": \"runs/a-seed1\", \"status\": \"failed\"}";
  const auto out = studyDirectory(dir, runs);
  const auto result = bounded(kGcrun + " study --status " + out);
  ASSERT_EQ(result.exit_code, 0) << result.output.substr(0, 2000);
  const auto lines = linesOf(result.output);
  ASSERT_EQ(lines.size(), 2u) << result.output.substr(0, 2000);
  EXPECT_LT(lines[0].size(), 1000u);
  EXPECT_TRUE(contains(lines[0], "boom")) << lines[0];
  EXPECT_EQ(result.output.find('\x1b'), std::string::npos);
  EXPECT_EQ(lines[1], "study: 0 of 1 done, 1 failed, 0 running, 0 left");
}

TEST(HostileStudy, StatusRefusesMoreRunsThanAStudyMayHave) {
  TempDir dir;
  std::string runs;
  for (int i = 0; i <= 100000; ++i) runs += i ? ",{}" : "{}";
  expectRefused(bounded(kGcrun + " study --status " + studyDirectory(dir, runs)),
                "lists 100001 runs, more than the 100000 a study may have");
}

TEST(HostileStudy, StatusRefusesAnAbsurdRunTimeAndIgnoresImpossibleDates) {
  TempDir dir;
  const auto out = studyDirectory(dir, "{\"dir\": \"runs/a-seed1\", \"status\": \"completed\", \"seconds\": 1e308}");
  expectRefused(bounded(kGcrun + " study --status " + out),
                dir.file("out/study.json") + ": runs[0].seconds is 1e+308; a run's time is 0 to 1000000000 s");

  studyDirectory(dir, "{\"dir\": \"runs/a-seed1\", \"status\": \"pending\"}, {\"dir\": \"runs/b-seed1\"}");
  writeRunJson(dir, "a-seed1",
               "\"status\": \"completed\", \"start_time\": \"0000-01-01T00:00:00Z\", "
               "\"end_time\": \"2026-12-01T14:05:09Z\"");
  const auto result = bounded(kGcrun + " study --status " + out);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto lines = linesOf(result.output);
  ASSERT_EQ(lines.size(), 3u) << result.output;
  EXPECT_EQ(lines[0].substr(0, lines[0].find_last_not_of(' ') + 1), "completed    runs/a-seed1") << result.output;
  EXPECT_EQ(lines[2], "study: 1 of 2 done, 0 failed, 0 running, 1 left") << result.output;
}

TEST(HostileStudy, StatusParsesObjectsOfAMillionKeysInLinearTime) {
  TempDir dir;
  // 14 MB, under study.json's 16 MiB: a search of the object per key inserted would take hours.
  std::string keys;
  for (int i = 0; i < 1000000; ++i) keys += "\"k" + std::to_string(i) + "\": 0, ";
  const auto out = studyDirectory(dir, "{" + keys + "\"dir\": \"runs/a-seed1\", \"status\": \"pending\"}");
  const auto result = bounded(kGcrun + " study --status " + out);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(contains(result.output, "study: 0 of 1 done, 0 failed, 0 running, 1 left")) << result.output;

  // A key twice, or nesting past any file of gcrun's, is no study.json.
  write(dir, "out/study.json", "{\"runs\": [], \"runs\": [{\"dir\": \"runs/a-seed1\"}]}");
  expectRefused(bounded(kGcrun + " study --status " + out), "the key \"runs\" appears twice");
  write(dir, "out/study.json", "{\"runs\": [], \"x\": " + std::string(100000, '[') + std::string(100000, ']') + "}");
  expectRefused(bounded(kGcrun + " study --status " + out), "nested deeper than 64 levels");
}

TEST(HostileStudy, StatusSaysWhatStandsWhereStudyJsonShouldBe) {
  TempDir dir;
  fs::create_directories(dir.file("out"));
  fs::create_symlink("/dev/zero", dir.file("out/study.json"));
  expectRefused(bounded(kGcrun + " study --status " + dir.file("out")),
                dir.file("out/study.json") + ": is not a regular file (a device, a FIFO or a socket)");
  fs::remove(dir.file("out/study.json"));
  expectRefused(bounded(kGcrun + " study --status " + dir.file("out")), dir.file("out/study.json") + ": no such file");
}

}  // namespace
}  // namespace gcrun
