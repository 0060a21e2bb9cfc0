#include "experiments/experiment.h"

#include <sys/file.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <yaml-cpp/yaml.h>

#include "experiments/checkpoint.h"
#include "experiments/launch/launch_environment.h"
#include "experiments/presets.h"
#include "experiments/resolved_experiment.h"
#include "experiments/runner.h"
#include "hyperparams/base/errors.h"
#include "outputs/files/safe_files.h"
#include "outputs/run_files.h"

namespace gcrun::experiments {
namespace {

void checkLaunch(const launch::LaunchOptions& launch) {
  if (launch.node_rank >= launch.nnodes) {
    throw UserError("--node-rank: " + std::to_string(launch.node_rank) + " is not below --nnodes " +
                    std::to_string(launch.nnodes));
  }
  if (launch.nnodes > 1 && (launch.master_addr.empty() || launch.master_port == 0)) {
    throw UserError("--nnodes " + std::to_string(launch.nnodes) +
                    " needs --master-addr and --master-port (or --rdzv-endpoint HOST:PORT): node 0's address "
                    "and a port every node can reach");
  }
}

void checkResumable(const ExperimentRequest& request) {
  const auto& dir = request.resume_dir;
  if (!request.config_file.empty()) {
    throw UserError("--resume: the settings come from " + dir + "/config.yaml; drop --config");
  }
  if (!request.output_dir.empty()) throw UserError("--resume: the run continues in " + dir + "; drop --output-dir");
  if (!std::filesystem::is_directory(dir)) {
    throw UserError("--resume " + dir + ": no such directory; expected the --output-dir of an earlier run");
  }
  if (!std::filesystem::is_regular_file(dir + "/config.yaml")) {
    throw UserError("--resume " + dir + ": not a gcrun run directory (it has no config.yaml); expected the "
                    "--output-dir of an earlier run");
  }
}

void checkWorldSize(const std::string& dir, int world_size) {
  const auto saved = CheckpointStore::savedWorldSize(dir);
  if (!saved) {
    throw UserError("--resume " + dir + ": no complete checkpoint there (checkpoints/manifest.json is missing)");
  }
  if (*saved != world_size) {
    throw UserError("--resume " + dir + ": its checkpoint was written by " + std::to_string(*saved) +
                    " workers, this launch has " + std::to_string(world_size) +
                    "; use --nnodes and --nproc-per-node that multiply to " + std::to_string(*saved));
  }
}

// The settings a resumed run may change: how long it goes on, and how it evaluates, records and
// checkpoints.
// Anything else would not fit the state its checkpoint holds.
bool mayChangeOnResume(const std::string& key) {
  for (const char* prefix : {"training.epochs", "training.max_steps", "evaluation.", "checkpoint.", "output.",
                             "distributed.timeout_s",
                             "description", "paper."}) {
    if (key.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

void checkResumedSettings(const ExperimentRequest& request, const ExperimentConfig& config) {
  const std::string saved_file = request.resume_dir + "/config.yaml";
  const auto saved = resolveExperiment(request.preset, saved_file, {});
  const auto keys = configKeys();
  for (const auto& spec : keys.keys()) {
    if (mayChangeOnResume(spec.key)) continue;
    YAML::Emitter now, before;
    now << YAML::Flow << spec.get(config);
    before << YAML::Flow << spec.get(saved);
    if (std::string(now.c_str()) != before.c_str()) {
      throw UserError("--resume " + request.resume_dir + ": " + spec.key + " is " + now.c_str() + " here but " +
                      before.c_str() + " in " + saved_file + ", whose checkpoint holds that run's state; a resumed "
                      "run may change only training.epochs, training.max_steps, evaluation.*, checkpoint.*, "
                      "output.* and distributed.timeout_s");
    }
  }
}

// Holds <dir>/.gcrun.lock (flock) for the rest of this process's life, and so for its workers,
// which inherit it: a second gcrun on the same run directory is refused. The kernel drops the
// lock when its holders exit, so a crashed run leaves none behind.
// A planted symlink at .gcrun.lock is refused before anything is written through it.
void lockRunDirectory(const std::string& dir) {
  files::UniqueFd lock;
  try {
    lock = files::Directory::open(dir, false).openLockFile(".gcrun.lock");
  } catch (const UserError& e) {
    throw UserError("--resume " + dir + ": " + e.what());
  }
  const int fd = lock.release();  // held until the process ends
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {0};
    const ssize_t n = ::pread(fd, pid, sizeof(pid) - 1, 0);
    ::close(fd);
    throw UserError("--resume " + dir + ": another gcrun" + (n > 0 ? " (pid " + std::string(pid, n) + ")" : "") +
                    " is using this run directory; wait for it to end");
  }
  const std::string me = std::to_string(::getpid());
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, me.data(), me.size(), 0) < 0) {
    // The pid only helps the message of a second gcrun; the lock holds without it.
  }
}

}  // namespace

int runExperiment(const ExperimentRequest& request) {
  checkLaunch(request.launch);
  const auto world = launch::worldFromEnvironment();
  const bool resume = !request.resume_dir.empty();
  if (resume) checkResumable(request);
  // A resumed run takes its settings from its own config.yaml; --set may still change some.
  const auto config = resolveExperiment(request.preset, resume ? request.resume_dir + "/config.yaml" : request.config_file,
                                        request.assignments);
  const bool worker = world.launched();
  const auto& nodes = request.launch;
  if (resume) {
    // gcrun's own launcher holds the lock for its workers; a worker of another launcher is rank 0's.
    const bool by_gcrun = std::getenv(launch::kLauncherRunDirVariable) != nullptr;
    if (!worker || (world.rank == 0 && !by_gcrun)) lockRunDirectory(request.resume_dir);
    checkResumedSettings(request, config);
  }
  if (resume && (worker || nodes.node_rank == 0)) {
    const int processes = worker ? world.world_size : nodes.nnodes * nodes.nproc_per_node;
    checkWorldSize(request.resume_dir, processes * static_cast<int>(config.distributed.simulated_workers));
  }
  const RunOptions options{resume ? request.resume_dir : request.output_dir, resume};
  const auto experiment = resolve(config);  // a worker's before waiting for the others
  if (worker || (nodes.nproc_per_node == 1 && nodes.nnodes == 1)) {
    const auto result = runWorker(experiment, options, world);
    return result.stop_signal != 0 ? 128 + result.stop_signal : 0;
  }
  // The launcher: check everything the workers would reject; node 0 makes the run directory
  // once and hands it to its workers (rank 0 tells the other nodes' workers through the group).
  checkInputs(experiment, nodes.nnodes * nodes.nproc_per_node * static_cast<int>(config.distributed.simulated_workers));
  auto launch = nodes;
  std::vector<std::string> worker_argv = request.argv;
  if (resume) {
    launch.run_dir = request.resume_dir;
  } else if (launch.node_rank == 0) {
    launch.run_dir = outputs::createRunDirectory(request.output_dir, config.experiment);
    worker_argv.push_back("--output-dir");
    worker_argv.push_back(launch.run_dir);
  }
  return launch::launchLocalWorkers(launch, worker_argv);
}

}  // namespace gcrun::experiments
