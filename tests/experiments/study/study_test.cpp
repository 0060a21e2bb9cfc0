// gcrun study: the plan of a study (runs, grid, seeds, refusals), and the binary running one:
// resumption, a failing run, the per-step training loss it logs.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <yaml-cpp/yaml.h>

#include "experiments/study/study.h"
#include "hyperparams/base/errors.h"
#include "tests/support/command.h"
#include "tests/support/gnuplot.h"
#include "tests/support/temp_dir.h"

namespace gcrun::experiments {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::readFile;
using testing::runCommand;
using testing::TempDir;

StudySpec studyFrom(const TempDir& dir, const std::string& yaml) {
  std::ofstream(dir.file("study.yaml")) << yaml;
  return loadStudy(dir.file("study.yaml"));
}

std::string userErrorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(StudyPlan, RunsGridAndSeeds) {
  TempDir dir;
  const auto spec = studyFrom(dir,
                              "base: fashion-sgd\nset: {training.epochs: 1}\n"
                              "runs:\n  - {name: sgd}\n  - {name: rank1, preset: fashion-powersgd-rank1}\n"
                              "grid: {reducer.rank: [1, 2, 4]}\nseeds: [1, 2]\n");
  const auto runs = planStudy(spec, {"training.max_steps=3"});
  // sgd does not read reducer.rank; rank1 with rank 1 is rank1 itself.
  std::vector<std::string> names;
  for (const auto& run : runs) names.push_back(run.dir_name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"sgd-seed1", "sgd-seed2", "rank1-seed1", "rank1-seed2", "rank1-rank2-seed1",
                                      "rank1-rank2-seed2", "rank1-rank4-seed1", "rank1-rank4-seed2"}));
  const auto& run = runs[5];
  EXPECT_EQ(run.config, "rank1-rank2");
  EXPECT_EQ(run.seed, 2);
  EXPECT_EQ(run.preset, "fashion-powersgd-rank1");
  EXPECT_EQ(run.assignments,
            (std::vector<std::string>{"training.epochs=1", "reducer.rank=2", "training.max_steps=3", "seed=2"}));
  const auto config = YAML::Load(run.config_yaml);
  EXPECT_EQ(config["reducer"]["rank"].as<int>(), 2);
  EXPECT_EQ(config["seed"].as<int>(), 2);
  EXPECT_EQ(config["training"]["max_steps"].as<int>(), 3);
}

// A run's config.yaml written by an older gcrun, which lacked a key added since, still counts as
// the study's run; a value changed, or a key this gcrun does not know, does not.
TEST(StudyPlan, AConfigWrittenBeforeAKeyWasAddedIsTheSameRun) {
  TempDir dir;
  const auto run = planStudy(studyFrom(dir, "base: fashion-powersgd-rank2\n"), {}).front();
  EXPECT_TRUE(asksFor(run, run.config_yaml));
  const std::string added = "  layer_stats_every_steps: 0\n";
  const auto at = run.config_yaml.find(added);
  ASSERT_NE(at, std::string::npos) << run.config_yaml;
  auto older = run.config_yaml;
  older.erase(at, added.size());
  EXPECT_TRUE(asksFor(run, older));
  auto changed = older;
  changed.replace(changed.find("rank: 2"), 7, "rank: 3");
  EXPECT_FALSE(asksFor(run, changed));
  EXPECT_FALSE(asksFor(run, older + "unknown_section:\n  key: 1\n"));
  EXPECT_FALSE(asksFor(run, "{not yaml"));
}

TEST(StudyPlan, AGridWithoutRunsAppliesToTheBase) {
  TempDir dir;
  const auto runs = planStudy(studyFrom(dir, "base: fashion-powersgd-rank2\ngrid: {reducer.rank: [1, 4]}\n"), {});
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].dir_name, "rank1-seed1");
  EXPECT_EQ(runs[1].dir_name, "rank4-seed1");
}

TEST(StudyPlan, ABadRunIsRefusedNamingTheRunAndTheKey) {
  TempDir dir;
  const auto message = userErrorOf([&] {
    planStudy(
        studyFrom(dir, "base: fashion-sgd\nruns:\n  - {name: good}\n  - {name: bad, set: {training.epochz: 2}}\n"), {});
  });
  EXPECT_TRUE(contains(message, "run 'bad") && contains(message, "training.epochz")) << message;
  EXPECT_TRUE(contains(userErrorOf([&] { studyFrom(dir, "base: fashion-sgd\nrunz: []\n"); }), "unknown key 'runz'"));
  EXPECT_TRUE(contains(userErrorOf([&] { studyFrom(dir, "runs: [{name: a}]\n"); }), "`base` is missing"));
  EXPECT_TRUE(contains(userErrorOf([&] { loadStudy("no-such-study"); }), "neither a built-in study"));
  EXPECT_TRUE(
      contains(userErrorOf([&] { planStudy(studyFrom(dir, "base: fashion-sgd\nruns: [{name: a}, {name: a}]\n"), {}); }),
               "two configurations are named 'a'"));
  EXPECT_TRUE(contains(userErrorOf([&] {
                         planStudy(studyFrom(dir, "base: fashion-sgd\nruns: [{name: a, set: {reducer.name: nope}}]\n"),
                                   {});
                       }),
                       "unknown reducer 'nope'"));
}

TEST(StudyPlan, EveryBuiltInStudyPlans) {
  for (const auto& study : listStudies()) {
    EXPECT_FALSE(study.description.empty()) << study.name;
    const auto runs = planStudy(loadStudy(study.name), {});
    EXPECT_GE(runs.size(), 3u) << study.name;
  }
  EXPECT_EQ(planStudy(loadStudy("fashion-ranks"), {}).size(), 12u);  // 4 configurations x 3 seeds
}

// The configuration demo's refusal points users to (experiments/sync/demo.cpp) exists and resolves.
TEST(StudyPlan, GptSyncHasTheDemoRunThatDemosRefusalNames) {
  const auto runs = planStudy(loadStudy("gpt-sync"), {});
  EXPECT_TRUE(std::any_of(runs.begin(), runs.end(), [](const StudyRun& run) { return run.config == "demo"; }));
}

// --- the binary ---

const std::string kGcrun = GCRUN_BINARY_PATH;

// Two configurations x two seeds of 4 synthetic steps each: seconds per run.
const char kTinyStudy[] =
    "description: a tiny study\nbase: fashion-sgd\n"
    "set: {task.synthetic: true, task.synthetic_samples: 512, training.max_steps: 4, output.log_every_steps: 2}\n"
    "runs:\n  - {name: sgd}\n  - {name: rank2, preset: fashion-powersgd-rank2}\nseeds: [1, 2]\n";

fs::file_time_type modified(const std::string& path) { return fs::last_write_time(path); }

TEST(StudyBinary, RunsEveryRunWritesTheReportAndSkipsWhatIsDone) {
  TempDir dir;
  std::ofstream(dir.file("tiny.yaml")) << kTinyStudy;
  const std::string command = kGcrun + " study " + dir.file("tiny.yaml") + " --output-dir " + dir.file("out");
  const auto first = runCommand(command + " --jobs 2");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  for (const char* run : {"sgd-seed1", "sgd-seed2", "rank2-seed1", "rank2-seed2"}) {
    EXPECT_TRUE(contains(readFile(dir.file(std::string("out/runs/") + run + "/run.json")), "\"completed\"")) << run;
  }
  const auto study = YAML::LoadFile(dir.file("out/study.json"));
  ASSERT_EQ(study["runs"].size(), 4u);
  for (const auto& run : study["runs"]) EXPECT_EQ(run["status"].as<std::string>(), "completed");
  const auto report = readFile(dir.file("out/report.md"));
  EXPECT_TRUE(contains(report, "| sgd |") && contains(report, "| rank2 |")) << report;
  EXPECT_TRUE(contains(report, "2 (2 completed)")) << report;
  EXPECT_TRUE(fs::is_regular_file(dir.file("out/report.html")));
  if (gcrun::testing::gnuplotInstalled()) EXPECT_TRUE(fs::is_regular_file(dir.file("out/plots/loss-vs-step.png")));

  const auto before = modified(dir.file("out/runs/rank2-seed1/run.json"));
  const auto again = runCommand(command);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_TRUE(contains(again.output, "4 runs, 0 to do")) << again.output;
  EXPECT_EQ(modified(dir.file("out/runs/rank2-seed1/run.json")), before);
  // Other settings in the same directory are refused rather than mixed in.
  const auto other = runCommand(command + " --set training.max_steps=5");
  EXPECT_EQ(other.exit_code, 2) << other.output;
  EXPECT_TRUE(contains(other.output, "other settings")) << other.output;
}

TEST(StudyBinary, ARefusedRunIsRecordedAndTheOthersComplete) {
  TempDir dir;
  std::ofstream(dir.file("study.yaml"))
      << "base: fashion-sgd\nset: {task.synthetic: true, task.synthetic_samples: 512, training.max_steps: 2}\n"
         "runs:\n  - {name: good}\n  - {name: broken, set: {training.batch_size: 100000}}\n";
  const auto result = runCommand(kGcrun + " study " + dir.file("study.yaml") + " --output-dir " + dir.file("out"));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_TRUE(contains(result.output, "1 of 2 runs did not complete: broken-seed1")) << result.output;
  const auto study = YAML::LoadFile(dir.file("out/study.json"));
  EXPECT_EQ(study["runs"][0]["status"].as<std::string>(), "completed");
  EXPECT_EQ(study["runs"][1]["status"].as<std::string>(), "refused");
  EXPECT_EQ(study["runs"][1]["exit_code"].as<int>(), 2);
  EXPECT_TRUE(contains(study["runs"][1]["error"].as<std::string>(), "training.batch_size")) << study["runs"][1];
  EXPECT_TRUE(contains(readFile(dir.file("out/report.md")), "broken-seed1: refused"));
}

TEST(StudyBinary, AKilledStudyCompletesWhenRunAgain) {
  TempDir dir;
  std::ofstream(dir.file("study.yaml"))
      << "base: fashion-sgd\nset: {task.synthetic: true, task.synthetic_samples: 4096, training.epochs: 7,"
         " training.max_steps: 400, checkpoint.every_steps: 2}\nruns:\n  - {name: long}\n";
  const std::string command = kGcrun + " study " + dir.file("study.yaml") + " --output-dir " + dir.file("out");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", (command + " > " + dir.file("first.log") + " 2>&1").c_str(), nullptr);
    ::_exit(127);
  }
  // Kill the study (and its shell) once the run has a checkpoint; the run stops with it.
  const auto manifest = dir.file("out/runs/long-seed1/checkpoints/manifest.json");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(manifest) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(fs::exists(manifest)) << readFile(dir.file("first.log"));
  runCommand("pkill -KILL -f 'study " + dir.file("study.yaml") + "'");
  ::waitpid(pid, nullptr, 0);
  const auto again = runCommand(command);
  ASSERT_EQ(again.exit_code, 0) << again.output << readFile(dir.file("first.log"));
  EXPECT_TRUE(contains(again.output, "(resuming)")) << again.output;
  const auto info = YAML::LoadFile(dir.file("out/runs/long-seed1/run.json"));
  EXPECT_EQ(info["status"].as<std::string>(), "completed");
  EXPECT_EQ(info["steps"].as<int>(), 400);
}

// SIGTERM stops the study's runs after a checkpoint; the study still writes study.json and its
// report, and exits 128 + the signal.
TEST(StudyBinary, ASignalledStudyStopsItsRunsAndStillReports) {
  TempDir dir;
  std::ofstream(dir.file("study.yaml"))
      << "base: fashion-sgd\nset: {task.synthetic: true, task.synthetic_samples: 4096, training.epochs: 7,"
         " training.max_steps: 400, checkpoint.every_steps: 2}\nruns:\n  - {name: long}\n";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string command = "exec " + kGcrun + " study " + dir.file("study.yaml") + " --output-dir " +
                                dir.file("out") + " > " + dir.file("study.log") + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", command.c_str(), nullptr);
    ::_exit(127);
  }
  const auto manifest = dir.file("out/runs/long-seed1/checkpoints/manifest.json");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(manifest) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(fs::exists(manifest)) << readFile(dir.file("study.log"));
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const auto log = readFile(dir.file("study.log"));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM) << log;
  const auto study = YAML::LoadFile(dir.file("out/study.json"));
  EXPECT_EQ(study["runs"][0]["status"].as<std::string>(), "interrupted") << log;
  EXPECT_TRUE(contains(readFile(dir.file("out/report.md")), "long-seed1: interrupted")) << log;
}

// A study with `predict:` reads each run's trace once and writes its report, the prediction
// included, once: after the last run, not after each.
TEST(StudyBinary, APredictingStudyReportsOnceAtTheEnd) {
  TempDir dir;
  std::ofstream(dir.file("pays.yaml"))
      << "base: fashion-sgd\nset: {task.synthetic: true, task.synthetic_samples: 512, training.max_steps: 6,"
         " output.trace: \"2-4\"}\nruns:\n  - {name: exact}\n  - {name: rank2, preset: fashion-powersgd-rank2}\n"
         "predict: {workers: [2, 8], bandwidth: [1gbit], headline: \"workers=8,bandwidth=1gbit\"}\n";
  const auto result =
      runCommand(kGcrun + " study " + dir.file("pays.yaml") + " --output-dir " + dir.file("out") + " --jobs 2");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto count = [&](const std::string& part) {
    size_t n = 0;
    for (size_t at = result.output.find(part); at != std::string::npos; at = result.output.find(part, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("study: prediction in " + dir.file("out/predict/predict.md")), 1u) << result.output;
  EXPECT_EQ(count("report in " + dir.file("out/report.md")), 1u) << result.output;
  // After the runs' lines: the report comes last.
  EXPECT_GT(result.output.find("report in"), result.output.rfind("study: [2/2]")) << result.output;
  const auto report = readFile(dir.file("out/report.md"));
  EXPECT_TRUE(contains(report, "Does compression pay?")) << report;
  EXPECT_TRUE(contains(report, "8 workers, 1gbit")) << report;  // the headline's projected columns
  // The answer first: which method is fastest where, then the accuracy table; the full prediction
  // folds in the page, with a link to its CSV.
  EXPECT_LT(report.find("| workers | 1gbit/20us |"), report.find("| configuration |")) << report;
  const auto page = readFile(dir.file("out/report.html"));
  EXPECT_LT(page.find("<th>workers</th><th>1gbit/20us</th>"), page.find("<th>configuration</th>")) << page;
  EXPECT_TRUE(contains(page, "<details>") && contains(page, "<a href=\"predict/predict.csv\">")) << page;
  const auto predicted = readFile(dir.file("out/predict/predict.md"));
  EXPECT_TRUE(contains(predicted, "| exact-seed1 |") && contains(predicted, "| rank2-seed1 |")) << predicted;
}

TEST(StudyBinary, DryRunAndSlurmRunNothing) {
  TempDir dir;
  std::ofstream(dir.file("tiny.yaml")) << kTinyStudy;
  const std::string command = kGcrun + " study " + dir.file("tiny.yaml") + " --output-dir " + dir.file("out");
  const auto dry = runCommand(command + " --dry-run");
  ASSERT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_TRUE(contains(dry.output, "runs/rank2-seed2") && contains(dry.output, "--set seed=2")) << dry.output;
  EXPECT_FALSE(fs::exists(dir.file("out/runs")));
  const auto slurm = runCommand(command + " --slurm --nproc-per-node 2");
  ASSERT_EQ(slurm.exit_code, 0) << slurm.output;
  const auto script = readFile(dir.file("out/slurm.sbatch"));
  EXPECT_TRUE(contains(script, "#SBATCH --array=0-3") && contains(script, "--only \"$SLURM_ARRAY_TASK_ID\"")) << script;
  EXPECT_TRUE(contains(script, "#SBATCH --ntasks=2")) << script;
  EXPECT_TRUE(fs::is_empty(dir.file("out/runs")));
}

// The per-step training loss: every output.log_every_steps steps, averaged over the workers and
// the window, with its step; on real Fashion-MNIST it falls.
TEST(StepMetrics, TrainingLossIsLoggedEveryFewStepsAndFalls) {
  TempDir dir;
  const auto result = runCommand(kGcrun +
                                 " experiment fashion-sgd --nproc-per-node 2 --set training.max_steps=40"
                                 " --set output.log_every_steps=5 --set output.sinks=[jsonl] --output-dir " +
                                 dir.file("run"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::ifstream in(dir.file("run/metrics.jsonl"));
  std::vector<std::pair<int, double>> losses;
  bool memory_logged = false;
  for (std::string line; std::getline(in, line);) {
    const auto event = YAML::Load(line);
    memory_logged |= event["name"].as<std::string>() == "memory_norm";
    if (!event["window"]) continue;
    if (event["name"].as<std::string>() != "cross_entropy") continue;
    EXPECT_EQ(event["split"].as<std::string>(), "train");
    EXPECT_EQ(event["window"].as<int>(), 5);
    losses.emplace_back(event["step"].as<int>(), event["value"].as<double>());
  }
  ASSERT_GE(losses.size(), 4u);
  EXPECT_EQ(losses.front().first, 5);
  EXPECT_EQ(losses.back().first, 40);
  EXPECT_LT(losses.back().second, losses.front().second);
  EXPECT_FALSE(memory_logged) << "exact keeps no memory";
}

}  // namespace
}  // namespace gcrun::experiments
