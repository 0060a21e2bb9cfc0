// Runs the gcrun binary through failures: a killed worker, Ctrl-C, a diverging run, checkpoints
// and exact resume, corrupt and mismatched checkpoints, and a launch by the real torchrun.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include <torch/serialize.h>
#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include "tests/support/command.h"
#include "tests/support/free_port.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace {

using gcrun::testing::freePort;
using gcrun::testing::gcrunLines;
using gcrun::testing::Process;
using gcrun::testing::TempDir;
using gcrun::testing::waitFor;
using Clock = std::chrono::steady_clock;

// Short timeouts so that failures surface in seconds; small synthetic batches.
const std::string kQuick =
    " --set task.synthetic=true --set training.batch_size=32 --set distributed.timeout_s=20"
    " --set output.sinks=[jsonl,csv] --set task.test_batch_size=500";

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

struct Result {
  int exit_code;
  std::string output;
};

Result gcrun(const std::string& arguments, const TempDir& dir, std::chrono::seconds limit = std::chrono::seconds(120)) {
  Process process(
      std::string(GCRUN_BINARY_PATH) + " " + arguments,
      dir.file("log-" + std::to_string(::getpid()) + "-" + std::to_string(Clock::now().time_since_epoch().count())));
  const int code = process.wait(limit);
  return {code, process.output()};
}

// name -> value of the measurements at `step` (timings left out: they are not reproducible).
std::map<std::string, double> metricsAt(const std::string& run_dir, int64_t step) {
  std::map<std::string, double> values;
  std::stringstream stream(readFile(run_dir + "/metrics.jsonl"));
  for (std::string line; std::getline(stream, line);) {
    const auto node = YAML::Load(line);
    const auto name = node["name"].as<std::string>();
    if (node["step"].as<int64_t>() != step || name == "time_per_batch" || name == "elapsed_s") continue;
    values[node["split"].as<std::string>() + "." + node["name"].as<std::string>()] = node["value"].as<double>();
  }
  return values;
}

std::map<std::string, at::Tensor> checkpointOf(const std::string& run_dir, int rank) {
  const auto manifest = YAML::LoadFile(run_dir + "/checkpoints/manifest.json");
  const auto file = run_dir + "/checkpoints/" + manifest["files"][rank]["file"].as<std::string>();
  const std::string bytes = readFile(file);
  std::map<std::string, at::Tensor> state;
  for (const auto& item : torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end())).toGenericDict()) {
    state[item.key().toStringRef()] = item.value().toTensor();
  }
  return state;
}

std::vector<pid_t> workerPids(const std::string& run_dir) {
  std::vector<pid_t> pids;
  const std::string path = run_dir + "/workers.json";
  if (!std::filesystem::exists(path)) return pids;
  for (const auto& worker : YAML::LoadFile(path)["workers"]) pids.push_back(worker["pid"].as<pid_t>());
  return pids;
}

int64_t manifestStep(const std::string& run_dir) {
  return YAML::LoadFile(run_dir + "/checkpoints/manifest.json")["step"].as<int64_t>();
}

TEST(Faults, AKilledWorkerStopsTheOthersNamingIt) {
  TempDir dir;
  const std::string run = dir.file("run");
  Process launcher(std::string(GCRUN_BINARY_PATH) + " experiment fashion-sgd --nproc-per-node 2 --output-dir " + run +
                       kQuick + " --set training.max_steps=100000",
                   dir.file("log"));
  ASSERT_TRUE(waitFor([&] { return workerPids(run).size() == 2 && std::filesystem::exists(run + "/run.json"); },
                      std::chrono::seconds(60)))
      << launcher.output();
  std::this_thread::sleep_for(std::chrono::seconds(1));  // training, past the rendezvous
  const auto pids = workerPids(run);
  const auto killed_at = Clock::now();
  ASSERT_EQ(::kill(pids[1], SIGKILL), 0);
  const int code = launcher.wait(std::chrono::seconds(40));
  const double seconds = std::chrono::duration<double>(Clock::now() - killed_at).count();
  const auto output = launcher.output();
  EXPECT_EQ(code, 128 + SIGKILL) << output;
  EXPECT_LT(seconds, 20.0) << output;  // well within distributed.timeout_s
  EXPECT_TRUE(contains(output, "worker rank 1 exited with code 137")) << output;
  // The survivor's own line names the rank that failed.
  EXPECT_TRUE(contains(output, "gcrun: failed: rank 1 failed")) << output;
  for (pid_t pid : pids) EXPECT_NE(::kill(pid, 0), 0) << "worker " << pid << " is still running";
}

TEST(Faults, InterruptWritesAFinalCheckpointAndResumeContinues) {
  TempDir dir;
  const std::string run = dir.file("run");
  Process launcher(std::string(GCRUN_BINARY_PATH) +
                       " experiment fashion-powersgd-rank2 --nproc-per-node 2 --output-dir " + run + kQuick +
                       " --set training.max_steps=100000 --set checkpoint.every_steps=4",
                   dir.file("log"));
  ASSERT_TRUE(
      waitFor([&] { return std::filesystem::exists(run + "/checkpoints/manifest.json"); }, std::chrono::seconds(60)))
      << launcher.output();
  ::kill(launcher.pid(), SIGINT);
  const int code = launcher.wait(std::chrono::seconds(40));
  const auto output = launcher.output();
  EXPECT_EQ(code, 128 + SIGINT) << output;
  const auto info = YAML::LoadFile(run + "/run.json");
  EXPECT_EQ(info["status"].as<std::string>(), "interrupted") << output;
  const int64_t steps = info["steps"].as<int64_t>();
  EXPECT_EQ(manifestStep(run), steps) << "the final checkpoint is the last step";
  for (pid_t pid : workerPids(run)) EXPECT_NE(::kill(pid, 0), 0);

  auto resumed = gcrun("experiment fashion-powersgd-rank2 --nproc-per-node 2 --resume " + run +
                           " --set training.max_steps=" + std::to_string(steps + 2),
                       dir);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const auto after = YAML::LoadFile(run + "/run.json");
  EXPECT_EQ(after["status"].as<std::string>(), "completed");
  EXPECT_EQ(after["steps"].as<int64_t>(), steps + 2);
  EXPECT_EQ(manifestStep(run), steps + 2);
}

TEST(Faults, ADivergingRunStopsNamingTheStep) {
  TempDir dir;
  const std::string run = dir.file("run");
  auto result = gcrun("experiment fashion-sgd --output-dir " + run + kQuick +
                          " --set optimizer.learning_rate=1e30 --set optimizer.warmup_epochs=0"
                          " --set training.max_steps=50 --set checkpoint.every_steps=1",
                      dir);
  EXPECT_EQ(result.exit_code, 1) << result.output;
  const auto errors = gcrunLines(result.output);
  ASSERT_EQ(errors.size(), 1u) << result.output;
  EXPECT_TRUE(contains(errors[0], "gcrun: failed: step ")) << errors[0];
  EXPECT_TRUE(contains(errors[0], "not finite") || contains(errors[0], "the loss is")) << errors[0];
  // The last good checkpoint stays: the one before the failing step.
  const int64_t failed_step = std::stoll(errors[0].substr(std::string("gcrun: failed: step ").size()));
  EXPECT_EQ(manifestStep(run), failed_step - 1) << errors[0];
  EXPECT_TRUE(contains(errors[0], "checkpoint of step " + std::to_string(failed_step - 1) + " is kept")) << errors[0];
}

// A diloco run whose last step is a sync that overflows the global model θ_g used to end
// `completed`, every validation and test metric null. An outer step that makes θ_g nan or inf
// stops the run naming the step and the parameter; one that leaves it finite but so large that
// the evaluation is nan stops it naming the metric. Either way exit 1 and run.json `failed`.
TEST(Faults, AGlobalModelThatOverflowsStopsTheRun) {
  for (const char* outer_learning_rate : {"1e38", "1e30"}) {
    SCOPED_TRACE(outer_learning_rate);
    TempDir dir;
    const std::string run = dir.file("run");
    auto result = gcrun("experiment fashion-sgd --output-dir " + run + kQuick +
                            " --set sync.strategy=diloco --set sync.every=2 --set training.max_steps=2"
                            " --set evaluation.max_samples=500 --set sync.outer_learning_rate=" +
                            outer_learning_rate,
                        dir);
    EXPECT_EQ(result.exit_code, 1) << result.output;
    const auto errors = gcrunLines(result.output);
    ASSERT_EQ(errors.size(), 1u) << result.output;
    EXPECT_TRUE(contains(errors[0], "gcrun: failed: step 2: ")) << errors[0];
    const bool global_model = std::string(outer_learning_rate) == "1e38";
    EXPECT_TRUE(contains(errors[0], global_model
                                        ? "the global model's 'fc1.weight' is not finite (nan or inf) after the"
                                        : "the evaluated test cross_entropy is nan after it"))
        << errors[0];
    const auto record = YAML::LoadFile(run + "/run.json");
    EXPECT_EQ(record["status"].as<std::string>(), "failed");
  }
}

// 6 steps straight, and 3 steps + resume to 6, mid-epoch, with `settings` (2 workers): the same
// metrics and the same final state, bit for bit, every entry of `carried` among them. A second
// straight run with the same seed gives the same metrics too.
void expectResumeIsExact(const std::string& settings, const std::vector<std::string>& carried) {
  TempDir dir;
  const std::string straight = dir.file("straight"), again = dir.file("again"), split = dir.file("split");
  const std::string run = "experiment fashion-powersgd-rank2 --nproc-per-node 2" + kQuick + settings;
  auto a = gcrun(run + " --output-dir " + straight + " --set training.max_steps=6", dir);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto b = gcrun(run + " --output-dir " + split + " --set training.max_steps=3", dir);
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(manifestStep(split), 3);
  auto c = gcrun(
      "experiment fashion-powersgd-rank2 --nproc-per-node 2 --resume " + split + " --set training.max_steps=6", dir);
  ASSERT_EQ(c.exit_code, 0) << c.output;
  auto d = gcrun(run + " --output-dir " + again + " --set training.max_steps=6", dir);
  ASSERT_EQ(d.exit_code, 0) << d.output;

  const auto expected = metricsAt(straight, 6);
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(metricsAt(split, 6), expected);
  EXPECT_EQ(metricsAt(again, 6), expected);
  EXPECT_FALSE(metricsAt(split, 3).empty()) << "the resumed run appends to the first part's metrics";
  EXPECT_EQ(YAML::LoadFile(split + "/run.json")["bits_sent"].as<uint64_t>(),
            YAML::LoadFile(straight + "/run.json")["bits_sent"].as<uint64_t>());
  for (int rank = 0; rank < 2; ++rank) {
    const auto want = checkpointOf(straight, rank);
    const auto got = checkpointOf(split, rank);
    int compared = 0;
    for (const auto& [name, tensor] : want) {
      if (name == "counter/elapsed_s") continue;
      ASSERT_TRUE(got.count(name)) << name;
      EXPECT_TRUE(torch::equal(tensor, got.at(name))) << "rank " << rank << ": " << name;
      ++compared;
    }
    for (const auto& name : carried) EXPECT_TRUE(want.count(name)) << name;
    EXPECT_GT(compared, 10);
  }
}

// With PowerSGD's warm start and error feedback.
TEST(Faults, ResumeIsExact) {
  expectResumeIsExact(" --set reducer.reuse_query=true --set optimizer.memory=true --set reducer.rank=2",
                      {"reducer/queries", "memory/fc1.weight", "momentum/fc1.weight"});
}

// powersgd-ddp past DDP's bucket rebuild (its second step) and its first compressed step: the old
// code refused its own checkpoint ("'reducer/bucket_order' is Long [10], this run's is Long [0]").
TEST(Faults, ResumeOfPowerSgdDdpPastItsRebuildIsExact) {
  expectResumeIsExact(
      " --set reducer.name=powersgd-ddp --set optimizer.memory=false --set reducer.rank=2"
      " --set reducer.start_iter=2 --set reducer.min_compression_rate=0",
      {"reducer/bucket_order", "reducer/seed_generator", "reducer/queries", "reducer/error"});
}

// AdamW (its moments and step count in the checkpoint) with the cosine schedule and the clip,
// over PowerSGD with error feedback: interrupted at some step S and resumed to S + 2, it ends as a
// run of S + 2 steps straight, bit for bit. decay_steps is set, so the schedule does not follow
// training.max_steps, which differs between the two.
TEST(Faults, AdamWInterruptedAndResumedIsTheUninterruptedRun) {
  TempDir dir;
  const std::string settings = " --nproc-per-node 2" + kQuick +
                               " --set optimizer.name=adamw --set optimizer.learning_rate=0.002"
                               " --set optimizer.schedule=cosine --set optimizer.warmup_steps=2"
                               " --set optimizer.decay_steps=50 --set optimizer.clip_norm=1";
  const std::string split = dir.file("split"), straight = dir.file("straight");
  Process launcher(std::string(GCRUN_BINARY_PATH) + " experiment fashion-powersgd-rank2 --output-dir " + split +
                       settings + " --set training.max_steps=100000 --set checkpoint.every_steps=3",
                   dir.file("log"));
  ASSERT_TRUE(
      waitFor([&] { return std::filesystem::exists(split + "/checkpoints/manifest.json"); }, std::chrono::seconds(60)))
      << launcher.output();
  ::kill(launcher.pid(), SIGINT);
  ASSERT_EQ(launcher.wait(std::chrono::seconds(40)), 128 + SIGINT) << launcher.output();
  const int64_t steps = manifestStep(split) + 2;
  auto resumed = gcrun("experiment fashion-powersgd-rank2 --nproc-per-node 2 --resume " + split +
                           " --set training.max_steps=" + std::to_string(steps),
                       dir);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  auto uninterrupted = gcrun("experiment fashion-powersgd-rank2 --output-dir " + straight + settings +
                                 " --set training.max_steps=" + std::to_string(steps),
                             dir);
  ASSERT_EQ(uninterrupted.exit_code, 0) << uninterrupted.output;

  const auto expected = metricsAt(straight, steps);
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(metricsAt(split, steps), expected);
  for (int rank = 0; rank < 2; ++rank) {
    const auto want = checkpointOf(straight, rank);
    const auto got = checkpointOf(split, rank);
    ASSERT_TRUE(want.count("adamw/exp_avg/fc1.weight") && want.count("memory/fc1.weight"));
    EXPECT_EQ(want.at("adamw/step").item<int64_t>(), steps);
    for (const auto& [name, tensor] : want) {
      if (name == "counter/elapsed_s") continue;
      ASSERT_TRUE(got.count(name)) << name;
      EXPECT_TRUE(torch::equal(tensor, got.at(name))) << "rank " << rank << ": " << name;
    }
  }
}

// Mid-epoch, with dropout masks and the LSTM's hidden state carried from batch to batch.
TEST(Faults, ResumeOfTheLstmMidEpochIsExact) {
  TempDir dir;
  const std::string settings = kQuick + " --set training.batch_size=2 --set task.synthetic_samples=2000";
  const std::string straight = dir.file("straight"), split = dir.file("split");
  auto a = gcrun(
      "experiment wikitext-powersgd-rank1 --output-dir " + straight + settings + " --set training.max_steps=4", dir);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto b =
      gcrun("experiment wikitext-powersgd-rank1 --output-dir " + split + settings + " --set training.max_steps=2", dir);
  ASSERT_EQ(b.exit_code, 0) << b.output;
  auto c = gcrun("experiment wikitext-powersgd-rank1 --resume " + split + " --set training.max_steps=4", dir);
  ASSERT_EQ(c.exit_code, 0) << c.output;

  const auto expected = metricsAt(straight, 4);
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(metricsAt(split, 4), expected);
  const auto want = checkpointOf(straight, 0);
  const auto got = checkpointOf(split, 0);
  ASSERT_TRUE(want.count("task/dropout_generator") && want.count("task/hidden/h"));
  for (const auto& [name, tensor] : want) {
    if (name == "counter/elapsed_s") continue;
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_TRUE(torch::equal(tensor, got.at(name))) << name;
  }
}

TEST(Faults, CorruptOrMismatchedCheckpointsExitTwo) {
  TempDir dir;
  const std::string run = dir.file("run");
  auto first = gcrun(
      "experiment fashion-sgd --nproc-per-node 2 --output-dir " + run + kQuick + " --set training.max_steps=2", dir);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const std::string metrics_before = readFile(run + "/metrics.jsonl");

  auto fewer = gcrun("experiment fashion-sgd --nproc-per-node 1 --resume " + run + " --set training.max_steps=4", dir);
  EXPECT_EQ(fewer.exit_code, 2) << fewer.output;
  ASSERT_EQ(gcrunLines(fewer.output).size(), 1u) << fewer.output;
  EXPECT_TRUE(contains(fewer.output, "written by 2 workers, this launch has 1")) << fewer.output;

  auto other_model = gcrun("experiment fashion-sgd --nproc-per-node 2 --resume " + run +
                               " --set training.max_steps=4 --set task.architecture=resnet18",
                           dir);
  EXPECT_EQ(other_model.exit_code, 2) << other_model.output;
  EXPECT_TRUE(contains(other_model.output, "task.architecture is resnet18 here but cnn in")) << other_model.output;

  const std::string file = run + "/checkpoints/rank-1-step-2.pt";
  ASSERT_TRUE(std::filesystem::exists(file));
  {
    std::fstream stream(file, std::ios::in | std::ios::out | std::ios::binary);
    stream.seekp(100);
    stream.put('\x5a');
  }
  auto corrupt =
      gcrun("experiment fashion-sgd --nproc-per-node 2 --resume " + run + " --set training.max_steps=4", dir);
  EXPECT_EQ(corrupt.exit_code, 2) << corrupt.output;
  EXPECT_TRUE(contains(corrupt.output, "rank-1-step-2.pt: corrupt checkpoint")) << corrupt.output;
  EXPECT_EQ(readFile(run + "/metrics.jsonl"), metrics_before) << "nothing is overwritten";
  EXPECT_EQ(manifestStep(run), 2);
}

// torchrun (Debian's python3-torch) starts the workers and hosts the store in its agent.
TEST(Faults, RunsUnderTorchrun) {
  if (!gcrun::testing::peerPythonHas("torch.distributed.run")) {
    GTEST_SKIP() << "torchrun is not available: apt-get install python3-torch";
  }
  TempDir dir;
  const std::string run = dir.file("run");
  Process torchrun(
      "/usr/bin/python3 -m torch.distributed.run --nnodes 1 --nproc_per_node 2 --redirects 1 --tee 1"
      " --master_addr 127.0.0.1 --master_port " +
          std::to_string(freePort()) + " --no_python " + std::string(GCRUN_BINARY_PATH) +
          " experiment fashion-sgd --output-dir " + run + kQuick + " --set training.max_steps=3",
      dir.file("torchrun.log"));
  const int code = torchrun.wait(std::chrono::seconds(120));
  ASSERT_EQ(code, 0) << torchrun.output();
  const auto info = YAML::LoadFile(run + "/run.json");
  EXPECT_EQ(info["status"].as<std::string>(), "completed");
  EXPECT_EQ(info["world_size"].as<int>(), 2);
  EXPECT_EQ(info["steps"].as<int>(), 3);
  EXPECT_TRUE(std::filesystem::exists(run + "/rank-1.log"));
}

TEST(Faults, LaunchFlagsAreChecked) {
  TempDir dir;
  auto missing = gcrun("experiment fashion-sgd --nnodes 2 --node-rank 1", dir);
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_TRUE(contains(missing.output, "--master-addr and --master-port")) << missing.output;
  auto rank = gcrun("experiment fashion-sgd --nnodes 2 --node-rank 2 --rdzv-endpoint host:29500", dir);
  EXPECT_EQ(rank.exit_code, 2) << rank.output;
  EXPECT_TRUE(contains(rank.output, "--node-rank")) << rank.output;
  auto endpoint = gcrun("experiment fashion-sgd --nnodes 2 --rdzv-endpoint host", dir);
  EXPECT_EQ(endpoint.exit_code, 2) << endpoint.output;
  EXPECT_TRUE(contains(endpoint.output, "HOST:PORT")) << endpoint.output;
}

// A worker whose store never answers gives up after distributed.timeout_s, naming the address.
TEST(Faults, AnUnreachableStoreFailsAfterTheTimeout) {
  TempDir dir;
  const int port = freePort();
  Process worker("env RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " " +
                     std::string(GCRUN_BINARY_PATH) + " experiment fashion-sgd --output-dir " + dir.file("run") +
                     kQuick + " --set distributed.timeout_s=3",
                 dir.file("log"));
  const int code = worker.wait(std::chrono::seconds(60));
  EXPECT_EQ(code, 1) << worker.output();
  EXPECT_TRUE(contains(worker.output(), "could not reach the store at 127.0.0.1:" + std::to_string(port)))
      << worker.output();
}

}  // namespace
