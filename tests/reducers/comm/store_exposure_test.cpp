// Who can reach a run's group: a one-machine run keeps its store in a private file and listens on
// loopback only; across machines, the run token keeps clients that do not know it out.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <ATen/ATen.h>
#include <yaml-cpp/yaml.h>

#include "experiments/launch/launch_environment.h"
#include "hyperparams/base/errors.h"
#include "reducers/comm/process_group.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace gcrun {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::Process;
using testing::readFile;
using testing::TempDir;
using testing::waitFor;

// Each rank joins from a thread of its own; returns what each join threw ("" when it joined).
std::vector<std::string> joinTwoRanks(const std::string& store_file, const std::string& token0,
                                      const std::string& token1, std::chrono::milliseconds timeout) {
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      comm::WorldSpec world;
      world.rank = rank;
      world.world_size = 2;
      world.store_file = store_file;
      world.run_token = rank == 0 ? token0 : token1;
      try {
        const auto group = comm::connect(world, "gloo", timeout);
        auto value = at::ones({1});
        group->allreduceSum(value);  // the group works, and neither leaves before the other joined
        if (value.item<float>() != 2.0f) errors[rank] = "the sum over the group is wrong";
      } catch (const std::exception& e) {
        errors[rank] = e.what();
        if (errors[rank].empty()) errors[rank] = "failed";
      }
    });
  }
  for (auto& thread : threads) thread.join();
  return errors;
}

TEST(GroupStore, RanksWithTheSameTokenJoinOverAFile) {
  TempDir dir;
  const auto errors =
      joinTwoRanks(dir.file("store"), "token-0123456789abcdef", "token-0123456789abcdef", std::chrono::seconds(20));
  EXPECT_EQ(errors, std::vector<std::string>(2)) << errors[0] << " | " << errors[1];
}

TEST(GroupStore, AClientWithoutTheTokenCannotJoin) {
  TempDir dir;
  const auto errors =
      joinTwoRanks(dir.file("store"), "token-0123456789abcdef", "another-token-98765", std::chrono::seconds(2));
  EXPECT_FALSE(errors[0].empty());
  EXPECT_FALSE(errors[1].empty());
}

TEST(GroupStore, RunTokenComesFromTheEnvironmentAndMustBeUsable) {
  const auto lookup = [](std::string token) {
    return [token](const std::string& name) -> std::optional<std::string> {
      const std::map<std::string, std::string> variables = {{"RANK", "0"},
                                                            {"WORLD_SIZE", "2"},
                                                            {"MASTER_ADDR", "node0"},
                                                            {"MASTER_PORT", "29500"},
                                                            {launch::kRunTokenVariable, token}};
      const auto found = variables.find(name);
      return found == variables.end() ? std::nullopt : std::optional<std::string>(found->second);
    };
  };
  EXPECT_EQ(launch::worldFromVariables(lookup("0123456789abcdef0123")).run_token, "0123456789abcdef0123");
  for (const std::string bad : {"short", "has space in it 12345", "semi;colon-0123456789"}) {
    try {
      launch::worldFromVariables(lookup(bad));
      ADD_FAILURE() << bad << " was accepted";
    } catch (const UserError& e) {
      EXPECT_TRUE(contains(e.what(), "GCRUN_RUN_TOKEN")) << e.what();
    }
  }
}

// The socket inodes a process holds open.
std::set<std::string> socketInodes(pid_t pid) {
  std::set<std::string> inodes;
  std::error_code ignored;
  for (const auto& fd : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ignored)) {
    const std::string target = fs::read_symlink(fd.path(), ignored).string();
    if (target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  return inodes;
}

// The local addresses (hex, as /proc/net/tcp{,6} writes them) on which these sockets listen.
std::vector<std::string> listeningAddresses(const std::set<std::string>& inodes) {
  std::vector<std::string> addresses;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::istringstream lines(readFile(table));
    std::string line;
    std::getline(lines, line);  // the header
    while (std::getline(lines, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
      if (state == "0A" && inodes.count(inode)) addresses.push_back(local.substr(0, local.find(':')));
    }
  }
  return addresses;
}

bool isLoopback(const std::string& hex_address) {
  return hex_address == "0100007F" || hex_address == "00000000000000000000000001000000";
}

TEST(GroupStore, AOneMachineRunListensOnLoopbackOnlyAndKeepsItsStorePrivate) {
  TempDir dir;
  const std::string run = dir.file("run");
  Process launcher(std::string(GCRUN_BINARY_PATH) + " experiment fashion-sgd --nproc-per-node 2 --output-dir " + run +
                       " --set task.synthetic=true --set training.epochs=1000 --set output.log_every_steps=1"
                       " --set output.sinks=[jsonl]",
                   dir.file("log"));
  ASSERT_TRUE(waitFor([&] { return contains(readFile(run + "/metrics.jsonl"), "window"); }, std::chrono::seconds(60)))
      << launcher.output();
  const auto workers = YAML::LoadFile(run + "/workers.json")["workers"];
  std::set<std::string> inodes = socketInodes(launcher.pid());
  std::string store_file;
  for (const auto& worker : workers) {
    const pid_t pid = worker["pid"].as<pid_t>();
    const auto own = socketInodes(pid);
    inodes.insert(own.begin(), own.end());
    std::istringstream environment(readFile("/proc/" + std::to_string(pid) + "/environ"));
    for (std::string entry; std::getline(environment, entry, '\0');) {
      if (entry.rfind("GCRUN_STORE_FILE=", 0) == 0) store_file = entry.substr(17);
    }
  }
  ASSERT_FALSE(inodes.empty()) << "the workers' sockets were not found";
  for (const auto& address : listeningAddresses(inodes)) {
    EXPECT_TRUE(isLoopback(address)) << "a worker listens on " << address;
  }
  ASSERT_FALSE(store_file.empty()) << "the workers were not given a store file";
  struct stat info {};
  ASSERT_EQ(::stat(fs::path(store_file).parent_path().c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0077, 0u) << "the store's directory is open to other users";

  ::kill(launcher.pid(), SIGTERM);
  EXPECT_EQ(launcher.wait(std::chrono::seconds(60)), 128 + SIGTERM) << launcher.output();
  EXPECT_FALSE(fs::exists(fs::path(store_file).parent_path())) << "the store's directory was left behind";
}

TEST(GroupStore, ABusyPortIsNamedAtOnce) {
  TempDir dir;
  // A listener on every interface holds the port, as another job's store would.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof(address);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  const std::string port = std::to_string(ntohs(address.sin_port));
  Process node0(std::string(GCRUN_BINARY_PATH) +
                    " experiment fashion-sgd --nnodes 2 --node-rank 0 --master-addr 127.0.0.1"
                    " --master-port " +
                    port + " --output-dir " + dir.file("run") +
                    " --set task.synthetic=true --set distributed.timeout_s=60",
                dir.file("log"));
  EXPECT_NE(node0.wait(std::chrono::seconds(30)), -1) << "a busy port waited for the timeout: " << node0.output();
  EXPECT_TRUE(contains(node0.output(), "could not host the store on port " + port + ": the port is in use"))
      << node0.output();
  ::close(fd);
}

}  // namespace
}  // namespace gcrun
