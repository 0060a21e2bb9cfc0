#include "experiments/experiment.h"

#include "experiments/launch/launch_environment.h"
#include "experiments/setup/command_line.h"
#include "experiments/setup/resolved_experiment.h"
#include "experiments/setup/resolved_file.h"
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

// The launcher's check of the task's input for `world_size` workers (data files, the
// architecture, a batch larger than each worker's data) before anything is written, since its
// workers would refuse it only once the group has formed: TaskSpec::check where the task has one,
// which builds no model; otherwise the task built once, as a worker would.
void checkInputs(const ResolvedExperiment& experiment, int world_size) {
  const auto& config = experiment.config;
  const tasks::TaskContext context{config.task, config.training.batch_size, static_cast<uint64_t>(config.seed),
                                   c10::kCPU};
  if (experiment.task.check) return experiment.task.check(context, world_size);
  const auto task = experiment.task.make(context);
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
  if (experiment.resume) {
    launch.run_dir = experiment.resume->dir;
  } else if (launch.node_rank == 0) {
    launch.run_dir = outputs::RunDirectory::create(request.output_dir, config.experiment).path();
  }
  files::directoryToWrite(handoff.path(), kResolvedFile).writeAtomically(kResolvedFile, resolved);
  ExperimentRequest worker;
  worker.preset = config.experiment;
  worker.resolved_file = handoff.path() + "/" + kResolvedFile;
  if (experiment.resume) worker.resume_dir = experiment.resume->dir;
  worker.plugins = request.plugins;  // loaded before the file is read, since it may name theirs
  worker.launch.nproc_per_node = launch.nproc_per_node;
  std::vector<std::string> worker_argv = {process::currentExecutable()};
  for (auto& argument : experimentArguments(worker)) worker_argv.push_back(std::move(argument));
  return launch::launchLocalWorkers(launch, worker_argv);
}

// runExperiment's work, once the request is resolved.
int runInRole(const ResolvedExperiment& experiment, const ExperimentRequest& request, const launch::WorldSpec& world,
              const std::optional<std::string>& launched_dir) {
  const auto& config = experiment.config;
  const auto& resume = experiment.resume;
  const bool worker = world.launched();
  const int simulated = static_cast<int>(config.distributed.simulated_workers);
  const auto nodes = worker || !resume ? request.launch : resume->launchOf(request.launch, simulated);
  // A worker of gcrun's launcher resumes what its launcher checked; the others check here. The
  // checkpoint's manifest is the first node's to check.
  if (resume && !launched_dir) {
    const int processes = worker ? world.world_size : nodes.nnodes * nodes.nproc_per_node;
    resume->checkStart(config, processes * simulated, worker || nodes.node_rank == 0);
  }
  // gcrun's own launcher holds the lock for its workers, taken before they start; a worker of
  // another launcher is rank 0's, and a process that trains itself takes it once the checkpoints
  // have passed their checks (RunOptions::lock_resumed).
  const bool runs_here = worker || (nodes.nproc_per_node == 1 && nodes.nnodes == 1);
  const bool locks = resume && (!worker || (world.rank == 0 && !launched_dir));
  if (runs_here) {
    // A worker of gcrun's launcher runs in the directory the launcher made (or resumes).
    RunOptions options{launched_dir.value_or(request.output_dir), launched_dir.has_value(), {}};
    if (locks) options.lock_resumed = [&resume] { resume->lock(); };
    const auto result = runWorker(experiment, options, world);
    return result.stop_signal != 0 ? 128 + result.stop_signal : 0;
  }
  if (locks) resume->lock();
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
                            auto experiment = readResolvedFile(request.resolved_file);
                            // Its launcher resolved the resume and checked it before starting it.
                            if (!request.resume_dir.empty()) experiment.resume = ResumedRun{request.resume_dir, {}};
                            run_name = experiment.config.experiment;
                            return runInRole(experiment, request, world, launched_dir);
                          });
}

}  // namespace gcrun::experiments
