#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/plugins.h"
#include "experiments/checkpoint.h"
#include "experiments/launcher.h"
#include "experiments/presets.h"
#include "experiments/runner.h"
#include "hyperparams/errors.h"
#include "outputs/run_files.h"
#include "reducers/process_group.h"

namespace gcrun::cli {
namespace {

template <typename Flags>
experiments::LaunchOptions launchOptions(const Flags& flags) {
  experiments::LaunchOptions launch;
  launch.nproc_per_node = flags.nproc_per_node;
  launch.nnodes = flags.nnodes;
  launch.node_rank = flags.node_rank;
  launch.master_addr = flags.master_addr;
  launch.master_port = flags.master_port;
  if (!flags.rdzv_endpoint.empty()) {
    const size_t colon = flags.rdzv_endpoint.rfind(':');
    int port = 0;
    try {
      port = colon == std::string::npos ? 0 : std::stoi(flags.rdzv_endpoint.substr(colon + 1));
    } catch (const std::exception&) {
    }
    if (colon == 0 || port < 1 || port > 65535) {
      throw UserError("--rdzv-endpoint: '" + flags.rdzv_endpoint + "' is not HOST:PORT with a port from 1 to 65535");
    }
    launch.master_addr = flags.rdzv_endpoint.substr(0, colon);
    launch.master_port = port;
  }
  if (launch.node_rank >= launch.nnodes) {
    throw UserError("--node-rank: " + std::to_string(launch.node_rank) + " is not below --nnodes " +
                    std::to_string(launch.nnodes));
  }
  if (launch.nnodes > 1 && (launch.master_addr.empty() || launch.master_port == 0)) {
    throw UserError("--nnodes " + std::to_string(launch.nnodes) +
                    " needs --master-addr and --master-port (or --rdzv-endpoint HOST:PORT): node 0's address "
                    "and a port every node can reach");
  }
  return launch;
}

void checkResumable(const std::string& dir, const std::string& config_file, const std::string& output_dir) {
  if (!config_file.empty()) throw UserError("--resume: the settings come from " + dir + "/config.yaml; drop --config");
  if (!output_dir.empty()) throw UserError("--resume: the run continues in " + dir + "; drop --output-dir");
}

void checkWorldSize(const std::string& dir, int world_size) {
  const auto saved = experiments::CheckpointStore::savedWorldSize(dir);
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

void addExperimentCommand(CLI::App& app, const std::vector<std::string>& argv, int& exit_code) {
  struct Flags {
    std::string name;
    std::vector<std::string> assignments;
    std::string config_file;
    std::string output_dir;
    int nproc_per_node = 1;
    std::vector<std::string> plugins;
    int nnodes = 1;
    int node_rank = 0;
    std::string master_addr;
    int master_port = 0;
    std::string rdzv_endpoint;
    std::string resume;
  };
  auto flags = std::make_shared<Flags>();
  auto* command = app.add_subcommand("experiment", "Run a named experiment preset (see `gcrun list`)");
  command->add_option("name", flags->name, "Preset name, e.g. fashion-powersgd-rank2")->required();
  command->add_option("--set", flags->assignments, "Override a setting: key=value (repeatable)");
  command->add_option("--config", flags->config_file, "YAML file of settings, applied before --set");
  command->add_option("--output-dir", flags->output_dir, "Run directory (default: a new one under outputs/)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  command->add_option("--nproc-per-node", flags->nproc_per_node, "Local worker processes to start")
      ->check(CLI::Range(1, 1024));
  command->add_option("--nnodes", flags->nnodes, "Machines taking part (as torchrun)")->check(CLI::Range(1, 65536));
  command->add_option("--node-rank", flags->node_rank, "This machine's index, 0 to nnodes-1")
      ->check(CLI::Range(0, 65535));
  command->add_option("--master-addr", flags->master_addr, "Host of node 0, where rank 0's store listens");
  command->add_option("--master-port", flags->master_port, "Port of rank 0's store")->check(CLI::Range(1, 65535));
  command->add_option("--rdzv-endpoint", flags->rdzv_endpoint, "HOST:PORT, the same as --master-addr and --master-port");
  command->add_option("--resume", flags->resume, "Continue the run in this directory from its latest checkpoint");
  addPluginOption(*command, flags->plugins);

  command->callback([flags, &argv, &exit_code] {
    // Workers re-run this command line, so they load the same plugins.
    loadPlugins(flags->plugins);
    auto launch = launchOptions(*flags);
    const bool resume = !flags->resume.empty();
    if (resume) checkResumable(flags->resume, flags->config_file, flags->output_dir);
    // A resumed run takes its settings from its own config.yaml; --set may still change some.
    const auto config = experiments::resolveExperiment(
        flags->name, resume ? flags->resume + "/config.yaml" : flags->config_file, flags->assignments);
    experiments::RunOptions options{resume ? flags->resume : flags->output_dir, resume};
    const bool worker = reducers::launchedByLauncher();
    if (resume && (worker || launch.node_rank == 0)) {
      const int world = worker ? reducers::worldFromEnvironment().world_size : launch.nnodes * launch.nproc_per_node;
      checkWorldSize(flags->resume, world);
    }
    if (worker || (launch.nproc_per_node == 1 && launch.nnodes == 1)) {
      const auto result = experiments::runWorker(config, options);
      if (result.stop_signal != 0) exit_code = 128 + result.stop_signal;
      return;
    }
    // The launcher: check everything the workers would reject; node 0 makes the run directory
    // once and hands it to its workers (rank 0 tells the other nodes' workers through the group).
    experiments::checkConfig(config);
    std::vector<std::string> worker_argv = argv;
    if (resume) {
      launch.run_dir = flags->resume;
    } else if (launch.node_rank == 0) {
      launch.run_dir = outputs::createRunDirectory(flags->output_dir, config.experiment);
      worker_argv.push_back("--output-dir");
      worker_argv.push_back(launch.run_dir);
    }
    exit_code = experiments::launchLocalWorkers(launch, worker_argv);
  });
}

}  // namespace gcrun::cli
