#include "experiments/experiment.h"

#include <algorithm>
#include <thread>

#include "experiments/launch/launch_environment.h"
#include "experiments/setup/command_line.h"
#include "experiments/setup/resolved_experiment.h"
#include "experiments/setup/resolved_file.h"
#include "experiments/training/checkpoint.h"
#include "experiments/worker/run_info.h"
#include "experiments/worker/runner.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/process.h"
#include "outputs/files/safe_files.h"
#include "outputs/run_directory.h"

namespace gcrun::experiments {
namespace {

// Where the launcher writes what it resolved for its workers, in its private directory.
constexpr const char* kResolvedFile = "resolved.yaml";

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

// Holds the run directory's lock for the rest of this process's life, and so for its workers
// (RunDirectory::lockForProcess); a planted symlink at the lock file is refused.
void lockRunDirectory(const std::string& dir) {
  try {
    outputs::RunDirectory(dir).lockForProcess();
  } catch (const UserError& e) {
    throw UserError("--resume " + dir + ": " + e.what());
  }
}

// Builds the task once, as a worker would, to find bad input (data files, the architecture, a
// batch larger than each of `world_size` workers' data) before anything is written: the
// launcher's check, since its workers would refuse it only once the group has formed.
void checkInputs(const ResolvedExperiment& experiment, int world_size) {
  const auto& config = experiment.config;
  auto task = experiment.task.make(
      tasks::TaskContext{config.task, config.training.batch_size, static_cast<uint64_t>(config.seed), c10::kCPU});
  tasks::batchesPerEpochOf(*task, {0, world_size}, config.training.batch_size);
}

// gcrun's launcher: checks everything the workers would reject; node 0 makes the run directory
// once and hands it to its workers in kLauncherRunDirVariable (rank 0 tells the other nodes'
// workers through the group). Each worker starts from what this process resolved, written once
// to a private file, not from the user's settings.
int launchWorkers(const ResolvedExperiment& experiment, const ExperimentRequest& request,
                  launch::LaunchOptions launch) {
  const auto& config = experiment.config;
  checkInputs(experiment,
              launch.nnodes * launch.nproc_per_node * static_cast<int>(config.distributed.simulated_workers));
  const auto resolved = resolvedFileText(experiment);
  // Before the run directory: a TMPDIR it cannot be made in leaves no empty directory behind.
  const launch::PrivateDirectory handoff;
  if (!request.resume_dir.empty()) {
    launch.run_dir = request.resume_dir;
  } else if (launch.node_rank == 0) {
    launch.run_dir = outputs::RunDirectory::create(request.output_dir, config.experiment).path();
  }
  files::directoryToWrite(handoff.path(), kResolvedFile).writeAtomically(kResolvedFile, resolved);
  ExperimentRequest worker;
  worker.preset = config.experiment;
  worker.resolved_file = handoff.path() + "/" + kResolvedFile;
  worker.resume_dir = request.resume_dir;
  worker.plugins = request.plugins;  // loaded before the file is read, since it may name theirs
  worker.launch.nproc_per_node = launch.nproc_per_node;
  std::vector<std::string> worker_argv = {process::currentExecutable()};
  for (auto& argument : experimentArguments(worker)) worker_argv.push_back(std::move(argument));
  return launch::launchLocalWorkers(launch, worker_argv);
}

// This machine's launch: a resume on one machine without --nproc-per-node starts as many worker
// processes as its checkpoint was written by (over distributed.simulated_workers each), up to one
// per core: the count comes from the run's manifest, and a crafted one must not start hundreds of
// processes. Beyond that checkWorldSize refuses, asking for the flag.
launch::LaunchOptions launchOf(const ExperimentRequest& request, const ExperimentConfig& config) {
  auto launch = request.launch;
  if (request.resume_dir.empty() || launch.nnodes != 1 || launch.nproc_per_node_given) return launch;
  const auto saved = CheckpointStore::savedWorldSize(request.resume_dir);
  const int simulated = static_cast<int>(config.distributed.simulated_workers);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (saved && *saved % simulated == 0 && *saved / simulated <= std::min(cores, launch::kMaxProcessesPerNode)) {
    launch.nproc_per_node = *saved / simulated;
  }
  return launch;
}

// runExperiment's work, once the request is resolved.
int runInRole(const ResolvedExperiment& experiment, const ExperimentRequest& request, const launch::WorldSpec& world,
              const std::optional<std::string>& launched_dir) {
  const auto& config = experiment.config;
  const auto& dir = request.resume_dir;
  const bool resume = !dir.empty();
  // A resumed run's lock, taken below by the process that holds it for the run.
  const auto lock = [dir] { lockRunDirectory(dir); };
  const bool worker = world.launched();
  const auto nodes = worker ? request.launch : launchOf(request, config);
  if (resume) {
    // Every refusal before the lock and the logs: a refused resume leaves the directory as it was.
    const int processes = worker ? world.world_size : nodes.nnodes * nodes.nproc_per_node;
    const int world_size = processes * static_cast<int>(config.distributed.simulated_workers);
    if (worker || nodes.node_rank == 0) checkWorldSize(dir, world_size);
    outputs::RunDirectory(dir).checkResumable(config.output.sinks, config.output.layer_stats_every_steps > 0,
                                              world_size);
  }
  // gcrun's own launcher holds the lock for its workers, taken before they start; a worker of
  // another launcher is rank 0's, and a process that trains itself takes it once the checkpoints
  // have passed their checks (RunOptions::lock_resumed).
  const bool runs_here = worker || (nodes.nproc_per_node == 1 && nodes.nnodes == 1);
  const bool locks = resume && (!worker || (world.rank == 0 && !launched_dir));
  if (runs_here) {
    // A worker of gcrun's launcher runs in the directory the launcher made (or resumes).
    RunOptions options{resume ? dir : launched_dir.value_or(request.output_dir), resume, launched_dir.has_value(), {}};
    if (locks) options.lock_resumed = lock;
    const auto result = runWorker(experiment, options, world);
    return result.stop_signal != 0 ? 128 + result.stop_signal : 0;
  }
  if (locks) lock();
  return launchWorkers(experiment, request, nodes);
}

// Runs `run`, which names the run in its argument once it knows it. A run refused before training
// (a UserError) says why in the directory it was given (or that the launcher made), where a study
// or a colleague looks, when `records`; no directory is made for it otherwise, and a resumed run's
// refusal leaves that run's record as it was.
template <class Run>
int recordingRefusal(const std::string& given_dir, bool records, std::string run_name, Run&& run) {
  try {
    return run(run_name);
  } catch (const UserError& e) {
    if (records && !given_dir.empty()) outputs::RunDirectory::recordRefusal(given_dir, refusedInfo(run_name, e.what()));
    throw;
  }
}

}  // namespace

int runExperiment(const ExperimentRequest& request) {
  const auto world = launch::worldFromEnvironment();
  const auto launched_dir = world.launched() ? launch::launcherRunDirectory() : std::nullopt;
  const bool records = world.launched() ? world.rank == 0 : request.launch.node_rank == 0;
  return recordingRefusal(launched_dir.value_or(request.output_dir), records && request.resume_dir.empty(),
                          request.preset, [&](std::string& run_name) {
                            const auto experiment = resolveExperiment(request);
                            run_name = experiment.config.experiment;
                            return runInRole(experiment, request, world, launched_dir);
                          });
}

int runLaunchedWorker(const ExperimentRequest& request) {
  const auto world = launch::worldFromEnvironment();
  const auto launched_dir = launch::launcherRunDirectory();
  return recordingRefusal(launched_dir.value_or(""), world.rank == 0 && request.resume_dir.empty(), request.preset,
                          [&](std::string& run_name) {
                            const auto experiment = readResolvedFile(request.resolved_file);
                            run_name = experiment.config.experiment;
                            return runInRole(experiment, request, world, launched_dir);
                          });
}

}  // namespace gcrun::experiments
