#include "experiments/launch/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <thread>

#include "experiments/launch/launch_environment.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/process.h"
#include "hyperparams/base/signal_flag.h"
#include "hyperparams/base/text.h"
#include "outputs/json_document.h"
#include "outputs/run_directory.h"
#include "outputs/run_info.h"

namespace gcrun::launch {

PrivateDirectory::PrivateDirectory() {
  const char* tmp = std::getenv("TMPDIR");
  const bool given = tmp && *tmp;
  std::string pattern = std::string(given ? tmp : "/tmp") + "/gcrun-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    const std::string why = std::strerror(errno);
    // TMPDIR is the user's setting: name it, as any environment variable gcrun cannot use.
    if (given) {
      throw UserError("TMPDIR=" + clipForMessage(tmp) +
                      ": gcrun's launcher cannot create its private directory there (" + why +
                      "); set TMPDIR to a writable directory, or unset it for /tmp");
    }
    throw std::runtime_error("launcher: cannot create a private directory in " + pattern + ": " + why);
  }
  path_ = pattern;
}

PrivateDirectory::~PrivateDirectory() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

namespace {

constexpr auto kStopGracePeriod = std::chrono::seconds(30);

// A port the kernel reports free on loopback; rank 0 binds it for the store right after.
int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("launcher: socket: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    throw std::runtime_error(std::string("launcher: cannot find a free port: ") + std::strerror(errno));
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

pid_t spawnWorker(int local_rank, const LaunchOptions& options, const std::string& master_addr, int master_port,
                  const std::string& store_file, const std::vector<std::string>& argv) {
  process::ChildSpec child;
  child.program = process::kThisExecutable;
  child.argv = argv;
  // A worker outlives no launcher: when it dies (even by SIGKILL) the worker gets SIGTERM and
  // stops after a checkpoint.
  child.parent_death_signal = SIGTERM;
  auto& environment = child.environment = process::Environment::inherited();
  environment.set("RANK", std::to_string(options.node_rank * options.nproc_per_node + local_rank));
  environment.set("LOCAL_RANK", std::to_string(local_rank));
  environment.set("GROUP_RANK", std::to_string(options.node_rank));
  environment.set("WORLD_SIZE", std::to_string(options.nnodes * options.nproc_per_node));
  environment.set("LOCAL_WORLD_SIZE", std::to_string(options.nproc_per_node));
  environment.set("MASTER_ADDR", master_addr);
  environment.set("MASTER_PORT", std::to_string(master_port));
  environment.unset("TORCHELASTIC_USE_AGENT_STORE");  // rank 0 (or the file) holds the store, not an agent
  if (store_file.empty()) {
    environment.unset(kStoreFileVariable);
  } else {
    environment.set(kStoreFileVariable, store_file);
  }
  // Read when OpenMP and OpenBLAS start, before main(): without it each worker's BLAS spins a thread
  // per core and the workers oversubscribe the machine (torchrun sets it to 1 for the same reason).
  if (!environment.has("OMP_NUM_THREADS")) {
    comm::WorldSpec local;
    local.local_world_size = options.nproc_per_node;
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    environment.set("OMP_NUM_THREADS", std::to_string(threadsPerWorker(local, processEnvironment(), cores)));
  }
  if (!options.run_dir.empty()) environment.set(kLauncherRunDirVariable, options.run_dir);
  return process::spawn(child);
}

void signalAll(const std::vector<pid_t>& pids, int signal) {
  for (pid_t pid : pids) {
    if (pid > 0) ::kill(pid, signal);
  }
}

// Reaps finished workers without blocking; returns the first failure's rank, or -1.
int reap(std::vector<pid_t>& pids, int& exit_code) {
  int failed_rank = -1;
  for (size_t rank = 0; rank < pids.size(); ++rank) {
    const auto code = pids[rank] > 0 ? process::exitCodeIfEnded(pids[rank]) : std::nullopt;
    if (!code) continue;
    pids[rank] = 0;
    if (*code != 0 && failed_rank < 0 && exit_code == 0) {
      failed_rank = static_cast<int>(rank);
      exit_code = *code;
    }
  }
  return failed_rank;
}

bool anyRunning(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) {
    if (pid > 0) return true;
  }
  return false;
}

// SIGTERM lets a worker stop after a checkpoint; SIGCONT lets a stopped one (SIGSTOP) receive it.
void stopAll(std::vector<pid_t>& pids) {
  signalAll(pids, SIGTERM);
  signalAll(pids, SIGCONT);
  const auto deadline = std::chrono::steady_clock::now() + kStopGracePeriod;
  int ignored = 0;
  while (anyRunning(pids) && std::chrono::steady_clock::now() < deadline) {
    reap(pids, ignored);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  signalAll(pids, SIGKILL);
  for (pid_t& pid : pids) {
    if (pid > 0) ::waitpid(pid, nullptr, 0);
    pid = 0;
  }
}

// Lets tests and operators find a worker's process.
void writeWorkerPids(const LaunchOptions& options, const std::vector<pid_t>& pids) {
  if (options.run_dir.empty()) return;
  outputs::Json workers = outputs::Json::array();
  for (size_t local = 0; local < pids.size(); ++local) {
    workers.push_back({{"rank", options.node_rank * options.nproc_per_node + static_cast<int>(local)},
                       {"local_rank", local},
                       {"pid", pids[local]}});
  }
  const outputs::Json json{{"node_rank", options.node_rank}, {"workers", workers}};
  outputs::RunDirectory(options.run_dir).write(outputs::run_files::kWorkers, outputs::jsonText(json) + "\n");
}

// A failed worker may have had no chance to record it (the disk was full, or it was killed while
// waiting for the one that failed): once every worker has ended, the run must not say `running`.
void recordWorkerFailure(const LaunchOptions& options, int rank, int exit_code) {
  if (options.run_dir.empty()) return;
  try {
    const outputs::RunDirectory dir(options.run_dir);
    auto info = dir.readInfo();
    if (!info || info->status != outputs::RunStatus::running) return;
    info->status = exit_code == 2 ? outputs::RunStatus::refused : outputs::RunStatus::failed;
    info->error =
        "worker rank " + std::to_string(rank) + " exited with code " + std::to_string(exit_code) + "; its log says why";
    info->end_time = outputs::isoTimeNow();
    dir.writeInfo(*info);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gcrun: warning: the run's failure could not be recorded in run.json: %s\n",
                 oneLine(firstLine(e.what())).c_str());
  }
}

}  // namespace

int launchLocalWorkers(const LaunchOptions& options, const std::vector<std::string>& argv) {
  const std::string master_addr = options.master_addr.empty() ? "127.0.0.1" : options.master_addr;
  const int port = options.master_port > 0 ? options.master_port : freePort();
  std::optional<PrivateDirectory> store_dir;
  if (options.nnodes == 1) store_dir.emplace();
  const std::string store_file = store_dir ? store_dir->path() + "/store" : "";
  const SignalFlag signals;  // passed on to the workers below

  std::vector<pid_t> pids;
  for (int local = 0; local < options.nproc_per_node; ++local) {
    pids.push_back(spawnWorker(local, options, master_addr, port, store_file, argv));
  }
  writeWorkerPids(options, pids);

  int exit_code = 0;
  while (anyRunning(pids)) {
    if (const int signal = signals.received(); signal != 0) {
      std::fprintf(stderr, "gcrun: received signal %d; stopping the workers\n", signal);
      exit_code = 128 + signal;
      stopAll(pids);
      break;
    }
    const int failed_rank = reap(pids, exit_code);
    if (failed_rank >= 0) {
      const int rank = options.node_rank * options.nproc_per_node + failed_rank;
      std::fprintf(stderr, "gcrun: worker rank %d exited with code %d; stopping the other workers\n", rank, exit_code);
      stopAll(pids);
      recordWorkerFailure(options, rank, exit_code);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return exit_code;
}

}  // namespace gcrun::launch
