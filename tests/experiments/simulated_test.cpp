// Simulated workers (distributed.simulated_workers): W logical workers in one process give what W
// processes give, bit for bit, and resume exactly.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include <yaml-cpp/yaml.h>

#include "experiments/study/study.h"
#include "tests/support/command.h"
#include "tests/support/temp_dir.h"

namespace gcrun {
namespace {

using testing::contains;
using testing::runCommand;
using testing::TempDir;

// One thread per worker in both setups, so that both compute alike.
const std::string kGcrun = std::string("OMP_NUM_THREADS=1 ") + GCRUN_BINARY_PATH;
const std::string kShortRun =
    " --set training.max_steps=30 --set seed=3 --set output.log_every_steps=5"
    " --set output.sinks=[jsonl]";

// Every event but the timings, as text: name, split, step, bits, epoch and the exact value.
std::vector<std::string> events(const std::string& run_dir, int64_t after_step = -1) {
  std::vector<std::string> out;
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto e = YAML::Load(line);
    const auto name = e["name"].as<std::string>();
    if (name == "time_per_batch" || name == "elapsed_s" || e["step"].as<int64_t>() <= after_step) continue;
    out.push_back(name + " " + e["split"].as<std::string>() + " step " + e["step"].as<std::string>() + " bits " +
                  e["bits"].as<std::string>() + " epoch " + e["epoch"].as<std::string>() + " = " +
                  e["value"].as<std::string>());
  }
  return out;
}

YAML::Node runJson(const std::string& run_dir) { return YAML::LoadFile(run_dir + "/run.json"); }

void run(const std::string& arguments) {
  const auto result = runCommand(kGcrun + " " + arguments);
  ASSERT_EQ(result.exit_code, 0) << arguments << "\n" << result.output;
}

void expectSameRun(const std::string& a, const std::string& b) {
  const auto left = events(a), right = events(b);
  ASSERT_GT(left.size(), 10u);
  EXPECT_EQ(left, right);
  EXPECT_EQ(runJson(a)["bits_sent"].as<uint64_t>(), runJson(b)["bits_sent"].as<uint64_t>());
  EXPECT_EQ(runJson(a)["world_size"].as<int>(), runJson(b)["world_size"].as<int>());
}

class SimulatedMatchesProcesses : public ::testing::TestWithParam<std::string> {};

TEST_P(SimulatedMatchesProcesses, TwoWorkers) {
  TempDir dir;
  const std::string settings =
      kShortRun + " --set reducer.name=" + GetParam() + (GetParam() == "exact" ? " --set optimizer.memory=false" : "");
  run("experiment fashion-powersgd-rank2 --simulated-workers 2 --output-dir " + dir.file("simulated") + settings);
  run("experiment fashion-powersgd-rank2 --nproc-per-node 2 --output-dir " + dir.file("processes") + settings);
  expectSameRun(dir.file("simulated"), dir.file("processes"));
  const auto info = runJson(dir.file("simulated"));
  EXPECT_EQ(info["simulated_workers"].as<int>(), 2);
  EXPECT_EQ(info["processes"].as<int>(), 1);
  EXPECT_GT(info["compute_per_batch_ms"].as<double>(), 0);
}

INSTANTIATE_TEST_SUITE_P(Reducers, SimulatedMatchesProcesses, ::testing::Values("powersgd", "exact", "topk"));

// Strategies whose workers' models differ between syncs (each simulated worker keeps its own), and
// demo, whose workers keep momenta of their own and send them compressed.
class LocalUpdatesSimulated : public ::testing::TestWithParam<std::string> {};

TEST_P(LocalUpdatesSimulated, MatchProcessesAndResumeExactly) {
  TempDir dir;
  const std::string settings = kShortRun + GetParam();
  run("experiment fashion-powersgd-rank2 --simulated-workers 2 --output-dir " + dir.file("simulated") + settings);
  run("experiment fashion-powersgd-rank2 --nproc-per-node 2 --output-dir " + dir.file("processes") + settings);
  expectSameRun(dir.file("simulated"), dir.file("processes"));
  // Stopped mid-period at step 10 (and evaluated there), resumed to 30: the whole run's events.
  run("experiment fashion-powersgd-rank2 --simulated-workers 2 --output-dir " + dir.file("parts") + settings +
      " --set training.max_steps=10");
  run("experiment fashion-powersgd-rank2 --resume " + dir.file("parts") + " --simulated-workers 2" + settings);
  EXPECT_EQ(events(dir.file("simulated"), 10), events(dir.file("parts"), 10));
  for (const char* key : {"bits_sent", "syncs", "bits_per_sync"}) {
    EXPECT_EQ(runJson(dir.file("simulated"))[key].as<double>(), runJson(dir.file("parts"))[key].as<double>()) << key;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, LocalUpdatesSimulated,
    ::testing::Values(" --set sync.strategy=local-sgd --set sync.every=4 --set sync.warmup_steps=3",
                      " --set sync.strategy=diloco --set sync.every=4",
                      " --set sync.strategy=streaming-diloco --set sync.every=4 --set sync.fragments=2",
                      " --set sync.strategy=sparseloco --set sync.every=4 --set reducer.name=exact",
                      " --set sync.strategy=demo --set reducer.name=exact --set optimizer.momentum=0"
                      " --set optimizer.momentum_type=heavy-ball"));

// What a run that syncs models reports: each sync's bits and drift, their count and mean in
// run.json, rank 0's replica beside the global model, and evaluations within the epoch.
TEST(LocalUpdates, ReportEachSyncAndRankZerosReplica) {
  TempDir dir;
  run("experiment fashion-sgd --simulated-workers 2 --output-dir " + dir.file("run") + kShortRun +
      " --set training.max_steps=8 --set sync.strategy=diloco --set sync.every=4 --set evaluation.every_steps=4"
      " --set evaluation.max_samples=256");
  const auto info = runJson(dir.file("run"));
  EXPECT_EQ(info["syncs"].as<int>(), 2);
  // The exact reducer sends every parameter as float32 at each sync, and nothing between them.
  EXPECT_EQ(info["bits_per_sync"].as<double>(), 32.0 * info["num_parameters"].as<double>());
  EXPECT_EQ(info["bits_sent"].as<double>(), 2 * info["bits_per_sync"].as<double>());
  std::map<std::string, std::vector<int64_t>> steps_of;  // "name split" -> the steps it was logged at
  std::ifstream in(dir.file("run/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const auto e = YAML::Load(line);
    const std::string key = e["name"].as<std::string>() + " " + e["split"].as<std::string>();
    steps_of[key].push_back(e["step"].as<int64_t>());
    if (key == "replica_drift train") EXPECT_GT(e["value"].as<double>(), 0) << "the replicas drift apart between syncs";
  }
  EXPECT_EQ(steps_of["bits_per_sync train"], (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(steps_of["replica_drift train"], (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(steps_of["accuracy test"], (std::vector<int64_t>{4, 8})) << "evaluated at step 4 within the epoch";
  EXPECT_EQ(steps_of["accuracy replica_test"], (std::vector<int64_t>{4, 8}));
}

TEST(LocalUpdates, KeysAreListedShownAndChecked) {
  const auto keys = runCommand(kGcrun + " list keys");
  for (const char* key :
       {"sync.every", "sync.warmup_steps", "sync.outer_learning_rate", "sync.outer_momentum", "sync.outer_nesterov"}) {
    EXPECT_TRUE(contains(keys.output, key)) << key << "\n" << keys.output;
  }
  const auto strategies = runCommand(kGcrun + " list strategies");
  EXPECT_TRUE(contains(strategies.output, "local-sgd") && contains(strategies.output, "sync.outer_momentum = 0.9"))
      << strategies.output;
  const auto shown = runCommand(kGcrun + " show fashion-sgd --set sync.strategy=diloco --set sync.every=16");
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_TRUE(contains(shown.output, "every: 16") && contains(shown.output, "outer_learning_rate: 0.7"))
      << shown.output;
  // In the sync section, up to the next top-level key (optimizer.warmup_steps is another key).
  const auto sync_at = shown.output.find("\nsync:\n");
  ASSERT_NE(sync_at, std::string::npos) << shown.output;
  size_t sync_end = shown.output.find('\n', sync_at + 1);
  while (sync_end != std::string::npos && shown.output.compare(sync_end + 1, 2, "  ") == 0) {
    sync_end = shown.output.find('\n', sync_end + 1);
  }
  const auto sync = shown.output.substr(sync_at, sync_end - sync_at);
  EXPECT_TRUE(contains(sync, "every: 16")) << sync;
  EXPECT_FALSE(contains(sync, "warmup_steps")) << "diloco does not read it\n" << shown.output;
  for (const char* bad :
       {"sync.every=0", "sync.outer_momentum=1", "sync.outer_learning_rate=-1", "sync.strategy=nope"}) {
    const auto refused = runCommand(kGcrun + " experiment fashion-sgd --set sync.strategy=diloco --set " + bad);
    EXPECT_EQ(refused.exit_code, 2) << bad << "\n" << refused.output;
  }
}

TEST(SimulatedWorkers, TwoProcessesOfTwoMatchFourProcesses) {
  TempDir dir;
  run("experiment fashion-powersgd-rank2 --nproc-per-node 2 --simulated-workers 2 --output-dir " +
      dir.file("simulated") + kShortRun);
  run("experiment fashion-powersgd-rank2 --nproc-per-node 4 --output-dir " + dir.file("processes") + kShortRun);
  expectSameRun(dir.file("simulated"), dir.file("processes"));
  EXPECT_EQ(runJson(dir.file("simulated"))["world_size"].as<int>(), 4);
  EXPECT_EQ(runJson(dir.file("simulated"))["processes"].as<int>(), 2);
}

TEST(SimulatedWorkers, ResumeIsExact) {
  TempDir dir;
  const std::string settings =
      " --simulated-workers 3 --set seed=5 --set output.log_every_steps=4"
      " --set output.sinks=[jsonl] --set reducer.rank=1";
  run("experiment fashion-powersgd-rank2 --set training.max_steps=24 --output-dir " + dir.file("whole") + settings);
  run("experiment fashion-powersgd-rank2 --set training.max_steps=10 --output-dir " + dir.file("parts") + settings);
  run("experiment fashion-powersgd-rank2 --resume " + dir.file("parts") + " --set training.max_steps=24" + settings);
  // The first part ends with an evaluation the whole run does not have: compare what follows it.
  EXPECT_EQ(events(dir.file("whole"), 10), events(dir.file("parts"), 10));
  using Metrics = std::map<std::string, double>;
  EXPECT_EQ(runJson(dir.file("whole"))["final_metrics"].as<Metrics>(),
            runJson(dir.file("parts"))["final_metrics"].as<Metrics>());
  EXPECT_EQ(runJson(dir.file("whole"))["bits_sent"].as<uint64_t>(),
            runJson(dir.file("parts"))["bits_sent"].as<uint64_t>());
  // Three checkpoint files, one per logical rank.
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_TRUE(std::filesystem::exists(dir.file("parts/checkpoints/rank-" + std::to_string(rank) + "-step-24.pt")));
  }
}

TEST(SimulatedWorkers, SixteenInOneProcessTrain) {
  TempDir dir;
  run("experiment fashion-powersgd-rank2 --simulated-workers 16 --set training.max_steps=24"
      " --set output.log_every_steps=4 --set output.sinks=[jsonl] --output-dir " +
      dir.file("run"));
  std::vector<double> losses;
  std::ifstream in(dir.file("run/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const auto e = YAML::Load(line);
    if (e["window"] && e["name"].as<std::string>() == "cross_entropy") losses.push_back(e["value"].as<double>());
  }
  ASSERT_GE(losses.size(), 4u);
  EXPECT_LT(losses.back(), losses.front());
  EXPECT_EQ(runJson(dir.file("run"))["world_size"].as<int>(), 16);
}

TEST(SimulatedWorkers, StudiesSweepThem) {
  const auto result = runCommand(kGcrun + " show fashion-sgd --set distributed.simulated_workers=0");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_TRUE(contains(result.output, "an integer >= 1")) << result.output;
  const auto runs = experiments::planStudy(experiments::loadStudy("fashion-workers"), {});
  EXPECT_EQ(runs.size(), 30u);  // (sgd, rank2) x W = 1, 2, 4, 8, 16 x 3 seeds
  EXPECT_EQ(runs[3].dir_name, "sgd-simulated_workers2-seed1");
}

}  // namespace
}  // namespace gcrun
