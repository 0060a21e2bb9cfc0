#include "experiments/experiment.h"

#include "experiments/checkpoint.h"
#include "experiments/launch/launch_environment.h"
#include "experiments/presets.h"
#include "experiments/runner.h"
#include "hyperparams/base/errors.h"
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
  if (resume && (worker || nodes.node_rank == 0)) {
    const int processes = worker ? world.world_size : nodes.nnodes * nodes.nproc_per_node;
    checkWorldSize(request.resume_dir, processes * static_cast<int>(config.distributed.simulated_workers));
  }
  const RunOptions options{resume ? request.resume_dir : request.output_dir, resume};
  if (worker || (nodes.nproc_per_node == 1 && nodes.nnodes == 1)) {
    const auto result = runWorker(config, options, world);
    return result.stop_signal != 0 ? 128 + result.stop_signal : 0;
  }
  // The launcher: check everything the workers would reject; node 0 makes the run directory
  // once and hands it to its workers (rank 0 tells the other nodes' workers through the group).
  checkConfig(config);
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
