// Two nodes in two network namespaces joined by a veth pair: `--nnodes 2` with one worker each
// trains exactly as `--nproc-per-node 2` on one machine, and a killed node ends the other within
// distributed.timeout_s. Needs root for the namespaces: skips, saying why, without it.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/command.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace {

using gcrun::testing::contains;
using gcrun::testing::Process;
using gcrun::testing::readFile;
using gcrun::testing::runCommand;
using gcrun::testing::TempDir;
using gcrun::testing::waitFor;
using Clock = std::chrono::steady_clock;

constexpr int kTimeoutS = 10;
const std::string kPort = "29511";  // any port: the namespaces are new and empty
// Small synthetic batches, a short timeout, one thread per worker in both layouts (the thread
// count changes LibTorch's sums, so it must match for the values to be equal bit for bit).
const std::string kSettings =
    " --set task.synthetic=true --set task.synthetic_samples=2048 --set training.batch_size=32"
    " --set task.test_batch_size=500 --set evaluation.max_samples=500 --set output.sinks=[jsonl]"
    " --set distributed.timeout_s=" +
    std::to_string(kTimeoutS);

// Two network namespaces, gcrun-pays-test-<pid>-<node>, joined by a veth pair with an address on
// each end; both removed (and with them the veth pair) when this goes away, whatever happened.
class TwoNodes {
 public:
  TwoNodes() {
    const std::string pid = std::to_string(::getpid());
    for (int node = 0; node < 2; ++node) {
      namespaces_.push_back("gcrun-pays-test-" + pid + "-" + std::to_string(node));
      interfaces_.push_back("gcpt" + pid + (node == 0 ? "a" : "b"));  // 15 characters at most
    }
  }
  ~TwoNodes() {
    for (const auto& name : created_) runCommand("ip netns del " + name);
  }
  TwoNodes(const TwoNodes&) = delete;
  TwoNodes& operator=(const TwoNodes&) = delete;

  // Empty once both nodes can reach each other; otherwise the command that failed and its output.
  std::string create() {
    for (const auto& name : namespaces_) {
      if (auto why = step("ip netns add " + name); !why.empty()) return why;
      created_.push_back(name);
    }
    if (auto why = step("ip link add " + interfaces_[0] + " netns " + namespaces_[0] + " type veth peer name " +
                        interfaces_[1] + " netns " + namespaces_[1]);
        !why.empty()) {
      return why;
    }
    for (int node = 0; node < 2; ++node) {
      const std::string in = "ip netns exec " + namespaces_[node] + " ";
      for (const auto& command :
           {in + "ip link set lo up", in + "ip addr add " + address(node) + "/24 dev " + interfaces_[node],
            in + "ip link set " + interfaces_[node] + " up"}) {
        if (auto why = step(command); !why.empty()) return why;
      }
    }
    return "";
  }

  static std::string address(int node) { return "10.231.1." + std::to_string(node + 1); }

  // gcrun as node `node` of two, one worker, inside that node's namespace.
  std::string gcrun(int node, const std::string& arguments) const {
    return "ip netns exec " + namespaces_[node] + " env OMP_NUM_THREADS=1 GLOO_SOCKET_IFNAME=" + interfaces_[node] +
           " " + GCRUN_BINARY_PATH + " " + arguments + " --nnodes 2 --nproc-per-node 1 --node-rank " +
           std::to_string(node) + " --master-addr " + address(0) + " --master-port " + kPort;
  }

 private:
  static std::string step(const std::string& command) {
    const auto result = runCommand(command);
    return result.exit_code == 0 ? "" : "`" + command + "` failed: " + result.output;
  }

  std::vector<std::string> namespaces_, interfaces_, created_;
};

// Skips the test when namespaces cannot be made here; `nodes` is ready otherwise.
#define CREATE_OR_SKIP(nodes)                                                                 \
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces (ip netns)"; \
  if (const auto why = (nodes).create(); !why.empty()) GTEST_SKIP() << "no network namespaces here: " << why

// "<split>.<name>@<step>" -> value and bits of every metrics.jsonl line but the timings.
std::map<std::string, std::string> metricValues(const std::string& run_dir) {
  std::map<std::string, std::string> values;
  std::stringstream lines(readFile(run_dir + "/metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const auto json = nlohmann::json::parse(line);
    const auto name = json.at("name").get<std::string>();
    if (name == "elapsed_s" || name == "time_per_batch") continue;
    values[json.at("split").get<std::string>() + "." + name + "@" + json.at("step").dump()] =
        json.at("value").dump() + " bits " + json.at("bits").dump();
  }
  return values;
}

nlohmann::json runInfo(const std::string& run_dir) { return nlohmann::json::parse(readFile(run_dir + "/run.json")); }

TEST(MultiNode, TwoNodesOverAVethPairTrainAsTwoLocalWorkers) {
  TwoNodes nodes;
  CREATE_OR_SKIP(nodes);
  TempDir dir;
  const std::string experiment = "experiment fashion-powersgd-rank2 --set training.max_steps=6" + kSettings;
  Process local("env OMP_NUM_THREADS=1 " + std::string(GCRUN_BINARY_PATH) + " " + experiment +
                    " --nproc-per-node 2 --output-dir " + dir.file("local"),
                dir.file("local.log"));
  ASSERT_EQ(local.wait(std::chrono::seconds(60)), 0) << local.output();

  Process node0(nodes.gcrun(0, experiment + " --output-dir " + dir.file("node0")), dir.file("node0.log"));
  Process node1(nodes.gcrun(1, experiment + " --output-dir " + dir.file("node1")), dir.file("node1.log"));
  ASSERT_EQ(node0.wait(std::chrono::seconds(60)), 0) << node0.output() << node1.output();
  ASSERT_EQ(node1.wait(std::chrono::seconds(10)), 0) << node1.output();

  const auto expected = metricValues(dir.file("local"));
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(metricValues(dir.file("node0")), expected);
  const auto local_info = runInfo(dir.file("local")), node_info = runInfo(dir.file("node0"));
  EXPECT_EQ(node_info.at("world_size"), 2);
  EXPECT_EQ(node_info.at("steps"), local_info.at("steps"));
  EXPECT_EQ(node_info.at("bits_sent"), local_info.at("bits_sent"));
  EXPECT_GT(node_info.at("bits_sent").get<uint64_t>(), 0u);
}

TEST(MultiNode, AKilledNodeEndsTheOtherWithinTheTimeout) {
  TwoNodes nodes;
  CREATE_OR_SKIP(nodes);
  TempDir dir;
  const std::string experiment = "experiment fashion-sgd --set training.max_steps=100000" + kSettings;
  Process node0(nodes.gcrun(0, experiment + " --output-dir " + dir.file("node0")), dir.file("node0.log"));
  Process node1(nodes.gcrun(1, experiment + " --output-dir " + dir.file("node1")), dir.file("node1.log"));
  // Training once node 0 has logged a step (every step is logged to metrics.jsonl).
  ASSERT_TRUE(waitFor([&] { return contains(readFile(dir.file("node0") + "/metrics.jsonl"), "\"train\""); },
                      std::chrono::seconds(60)))
      << node0.output() << node1.output();
  // Only node 0 writes workers.json: node 1's worker is its launcher's one child.
  const pid_t worker = std::stoi(
      readFile("/proc/" + std::to_string(node1.pid()) + "/task/" + std::to_string(node1.pid()) + "/children"));

  // The whole node goes, the worker first (its launcher's death would send it SIGTERM, a clean stop).
  const auto killed_at = Clock::now();
  ASSERT_EQ(::kill(worker, SIGKILL), 0);
  ASSERT_EQ(::kill(node1.pid(), SIGKILL), 0);
  const int code = node0.wait(std::chrono::seconds(3 * kTimeoutS));
  const double seconds = std::chrono::duration<double>(Clock::now() - killed_at).count();
  const auto output = node0.output();
  EXPECT_NE(code, -1) << "node 0 still runs " << seconds << " s after node 1 was killed: " << output;
  EXPECT_NE(code, 0) << output;
  EXPECT_LT(seconds, kTimeoutS + 2.0) << output;  // within distributed.timeout_s (and the launcher's poll)
  EXPECT_TRUE(contains(output, "gcrun: failed: rank 1 failed")) << output;  // the survivor names the lost node
  EXPECT_TRUE(contains(output, "worker rank 0 exited with code")) << output;
}

}  // namespace
