// Workers started apart, as torchrun, mpirun or srun start them (RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT), compare their resolved settings before their first collective: other settings are
// one line naming the key on every worker, exit 2 and a refusal in run.json, never an abort inside
// Gloo or two workers that train apart. A worker that stops because another one refused its
// checkpoint says that one's reason, as simulated workers and as processes.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/command.h"
#include "tests/support/free_port.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace {

using gcrun::testing::contains;
using gcrun::testing::freePort;
using gcrun::testing::gcrunLines;
using gcrun::testing::Process;
using gcrun::testing::readFile;
using gcrun::testing::TempDir;

const std::string kQuick =
    " --set task.synthetic=true --set training.batch_size=32 --set distributed.timeout_s=20"
    " --set output.sinks=[jsonl] --set task.test_batch_size=500 --set evaluation.max_samples=500"
    " --set training.max_steps=2";

struct Worker {
  int exit_code;
  std::string output;
};

// Two workers of one group, each with its own extra arguments, as torchrun would start them.
std::vector<Worker> twoWorkers(const TempDir& dir, const std::string& run, const std::string& rank0,
                               const std::string& rank1) {
  const std::string port = std::to_string(freePort());
  std::vector<std::unique_ptr<Process>> processes;
  for (int rank = 0; rank < 2; ++rank) {
    processes.push_back(std::make_unique<Process>(
        "env RANK=" + std::to_string(rank) + " LOCAL_RANK=" + std::to_string(rank) +
            " WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 OMP_NUM_THREADS=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port + " " +
            GCRUN_BINARY_PATH + " experiment fashion-sgd --output-dir " + run + kQuick + " " +
            (rank == 0 ? rank0 : rank1),
        dir.file(std::filesystem::path(run).filename().string() + "-rank" + std::to_string(rank) + ".log")));
  }
  std::vector<Worker> workers;
  for (auto& process : processes) {
    const int code = process->wait(std::chrono::seconds(90));
    workers.push_back({code, process->output()});
  }
  return workers;
}

nlohmann::json runInfo(const std::string& run) { return nlohmann::json::parse(readFile(run + "/run.json")); }

// Before: different seeds both ended `completed`, their models apart; sync.every 2 against 3
// aborted inside Gloo (SIGABRT, exit 134) and could leave run.json `running`.
TEST(WorkerAgreement, WorkersWithOtherSettingsStopNamingTheKey) {
  TempDir dir;
  const struct {
    std::string name, rank0, rank1, line;
  } cases[] = {
      {"seed", "--set seed=1", "--set seed=2", "seed is 1 on rank 0 but 2 on rank 1"},
      {"every", "--set sync.strategy=local-sgd --set sync.every=2", "--set sync.strategy=local-sgd --set sync.every=3",
       "sync.every is 2 on rank 0 but 3 on rank 1"},
  };
  for (const auto& c : cases) {
    const std::string run = dir.file(c.name);
    const auto workers = twoWorkers(dir, run, c.rank0, c.rank1);
    for (const auto& worker : workers) {
      EXPECT_EQ(worker.exit_code, 2) << c.name << ": " << worker.output;
      const auto lines = gcrunLines(worker.output);
      ASSERT_EQ(lines.size(), 1u) << c.name << ": " << worker.output;
      EXPECT_TRUE(contains(lines[0], "gcrun: error: the workers disagree on the resolved configuration: " + c.line))
          << lines[0];
    }
    const auto info = runInfo(run);
    EXPECT_EQ(info.at("status"), "refused") << info.dump();
    EXPECT_TRUE(contains(info.at("error").get<std::string>(), c.line)) << info.dump();
  }
}

TEST(WorkerAgreement, WorkersWithTheSameSettingsTrain) {
  TempDir dir;
  const std::string run = dir.file("same");
  for (const auto& worker : twoWorkers(dir, run, "--set seed=3", "--set seed=3")) {
    EXPECT_EQ(worker.exit_code, 0) << worker.output;
  }
  const auto info = runInfo(run);
  EXPECT_EQ(info.at("status"), "completed") << info.dump();
  EXPECT_EQ(info.at("world_size"), 2);
  EXPECT_EQ(info.at("steps"), 2);
}

// A byte changed in rank 1's checkpoint file after a 2-step run of `launch`.
std::string runWithACorruptRankOneCheckpoint(const TempDir& dir, const std::string& launch) {
  const std::string run = dir.file("run");
  const auto first = gcrun::testing::runCommand(std::string(GCRUN_BINARY_PATH) + " experiment fashion-sgd " + launch +
                                                " --output-dir " + run + kQuick);
  EXPECT_EQ(first.exit_code, 0) << first.output;
  std::fstream stream(run + "/checkpoints/rank-1-step-2.pt", std::ios::in | std::ios::out | std::ios::binary);
  stream.seekp(100);
  stream.put('\x5a');
  return run;
}

// Before: "another rank's checkpoint failed its checks (its message says why)", and no message said it.
TEST(WorkerAgreement, SimulatedWorkersSayWhyAnotherOnesCheckpointWasRefused) {
  TempDir dir;
  const auto run = runWithACorruptRankOneCheckpoint(dir, "--simulated-workers 2");
  const auto resumed = gcrun::testing::runCommand(std::string(GCRUN_BINARY_PATH) +
                                                  " experiment fashion-sgd --simulated-workers 2 --resume " + run +
                                                  " --set training.max_steps=4");
  EXPECT_EQ(resumed.exit_code, 2) << resumed.output;
  const auto lines = gcrunLines(resumed.output);
  ASSERT_EQ(lines.size(), 1u) << resumed.output;
  EXPECT_TRUE(contains(lines[0], "rank-1-step-2.pt: corrupt checkpoint")) << lines[0];
}

TEST(WorkerAgreement, WorkerProcessesSayWhyAnotherOnesCheckpointWasRefused) {
  TempDir dir;
  const auto run = runWithACorruptRankOneCheckpoint(dir, "--nproc-per-node 2");
  const auto resumed = gcrun::testing::runCommand(std::string(GCRUN_BINARY_PATH) +
                                                  " experiment fashion-sgd --nproc-per-node 2 --resume " + run +
                                                  " --set training.max_steps=4");
  EXPECT_EQ(resumed.exit_code, 2) << resumed.output;
  int errors = 0;
  for (const auto& line : gcrunLines(resumed.output)) {
    if (line.rfind("gcrun: error: ", 0) != 0) continue;
    ++errors;
    EXPECT_TRUE(contains(line, "rank-1-step-2.pt: corrupt checkpoint")) << line;
  }
  EXPECT_EQ(errors, 2) << resumed.output;  // each worker's, rank 0's saying rank 1's reason
}

}  // namespace
