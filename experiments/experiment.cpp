#include "experiments/experiment.h"

#include <filesystem>

#include <yaml-cpp/yaml.h>

#include "experiments/launch/launch_environment.h"
#include "experiments/setup/command_line.h"
#include "experiments/setup/presets.h"
#include "experiments/setup/resolved_experiment.h"
#include "experiments/training/checkpoint.h"
#include "experiments/worker/run_info.h"
#include "experiments/worker/runner.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/process.h"
#include "hyperparams/config_keys.h"
#include "outputs/files/safe_files.h"
#include "outputs/run_directory.h"

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

// The resumed run's config.yaml.
std::string savedConfig(const std::string& dir) {
  return outputs::RunDirectory(dir).pathOf(outputs::run_files::kConfig);
}

void checkResumable(const ExperimentRequest& request) {
  const auto& dir = request.resume_dir;
  if (!request.config_file.empty()) {
    throw UserError("--resume: the settings come from " + savedConfig(dir) + "; drop --config");
  }
  if (!request.output_dir.empty()) throw UserError("--resume: the run continues in " + dir + "; drop --output-dir");
  if (!std::filesystem::is_directory(dir)) {
    throw UserError("--resume " + dir + ": no such directory; expected the --output-dir of an earlier run");
  }
  if (const auto why = files::notRegularFileReason(savedConfig(dir)); !why.empty()) {
    throw UserError("--resume " + dir + ": not a gcrun run directory (its config.yaml: " + why +
                    "); expected the --output-dir of an earlier run");
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
                             "distributed.timeout_s", "description", "paper."}) {
    if (key.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

void checkResumedSettings(const ExperimentRequest& request, const ExperimentConfig& config) {
  const std::string saved_file = savedConfig(request.resume_dir);
  const auto saved = resolveExperiment(request.preset, saved_file, {});
  const auto keys = configKeys();
  for (const auto& spec : keys.keys()) {
    if (mayChangeOnResume(spec.key)) continue;
    YAML::Emitter now, before;
    now << YAML::Flow << spec.get(config);
    before << YAML::Flow << spec.get(saved);
    if (std::string(now.c_str()) != before.c_str()) {
      throw UserError("--resume " + request.resume_dir + ": " + spec.key + " is " + now.c_str() + " here but " +
                      before.c_str() + " in " + saved_file +
                      ", whose checkpoint holds that run's state; a resumed "
                      "run may change only training.epochs, training.max_steps, evaluation.*, checkpoint.*, "
                      "output.* and distributed.timeout_s");
    }
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

// runExperiment's work; `run_name` is set to the run's name once its settings are resolved.
int runInRole(const ExperimentRequest& request, const launch::WorldSpec& world,
              const std::optional<std::string>& launched_dir, std::string& run_name) {
  checkLaunch(request.launch);
  const bool resume = !request.resume_dir.empty();
  if (resume) checkResumable(request);
  // A resumed run takes its settings from its own config.yaml; --set may still change some.
  const std::string settings = resume ? savedConfig(request.resume_dir) : request.config_file;
  const auto config = resolveExperiment(request.preset, settings, request.assignments);
  run_name = config.experiment;
  const bool worker = world.launched();
  const auto& nodes = request.launch;
  if (resume) {
    // Every refusal before the lock and the logs: a refused resume leaves the directory as it was.
    checkResumedSettings(request, config);
    const int processes = worker ? world.world_size : nodes.nnodes * nodes.nproc_per_node;
    const int world_size = processes * static_cast<int>(config.distributed.simulated_workers);
    if (worker || nodes.node_rank == 0) checkWorldSize(request.resume_dir, world_size);
    outputs::RunDirectory(request.resume_dir)
        .checkResumable(config.output.sinks, config.output.layer_stats_every_steps > 0, world_size);
  }
  // gcrun's own launcher holds the lock for its workers, taken before they start; a worker of
  // another launcher is rank 0's, and a process that trains itself takes it once the checkpoints
  // have passed their checks (RunOptions::lock_resumed).
  const bool runs_here = worker || (nodes.nproc_per_node == 1 && nodes.nnodes == 1);
  const bool locks = resume && (!worker || (world.rank == 0 && !launched_dir));
  if (locks && !runs_here) lockRunDirectory(request.resume_dir);
  // A worker of gcrun's launcher runs in the directory the launcher made (or resumes).
  RunOptions options{resume ? request.resume_dir : launched_dir.value_or(request.output_dir), resume,
                     launched_dir.has_value()};
  if (locks && runs_here) options.lock_resumed = [dir = request.resume_dir] { lockRunDirectory(dir); };
  const auto experiment = resolve(config);  // a worker's before waiting for the others
  if (runs_here) {
    const auto result = runWorker(experiment, options, world);
    return result.stop_signal != 0 ? 128 + result.stop_signal : 0;
  }
  // The launcher: check everything the workers would reject; node 0 makes the run directory
  // once and hands it to its workers in kLauncherRunDirVariable (rank 0 tells the other nodes'
  // workers through the group).
  checkInputs(experiment, nodes.nnodes * nodes.nproc_per_node * static_cast<int>(config.distributed.simulated_workers));
  auto launch = nodes;
  if (resume) {
    launch.run_dir = request.resume_dir;
  } else if (launch.node_rank == 0) {
    launch.run_dir = outputs::RunDirectory::create(request.output_dir, config.experiment).path();
  }
  // Each local worker runs this request again, with the launch variables set.
  std::vector<std::string> worker_argv = {process::currentExecutable()};
  for (auto& argument : experimentArguments(request)) worker_argv.push_back(std::move(argument));
  return launch::launchLocalWorkers(launch, worker_argv);
}

}  // namespace

int runExperiment(const ExperimentRequest& request) {
  const auto world = launch::worldFromEnvironment();
  const auto launched_dir = world.launched() ? launch::launcherRunDirectory() : std::nullopt;
  std::string run_name = request.preset;
  try {
    return runInRole(request, world, launched_dir, run_name);
  } catch (const UserError& e) {
    // A run refused before training says why in the directory it was given (or that the launcher
    // made), where a study or a colleague looks; no directory is made for it otherwise. The
    // refusal of a resumed run leaves that run's record as it was.
    const std::string given = launched_dir.value_or(request.output_dir);
    const bool records = world.launched() ? world.rank == 0 : request.launch.node_rank == 0;
    if (records && request.resume_dir.empty() && !given.empty()) {
      outputs::RunDirectory::recordRefusal(given, refusedInfo(run_name, e.what()));
    }
    throw;
  }
}

}  // namespace gcrun::experiments
