#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/plugins.h"
#include "experiments/experiment.h"
#include "hyperparams/base/errors.h"

namespace gcrun::cli {
namespace {

// --rdzv-endpoint HOST:PORT is torchrun's spelling of --master-addr and --master-port.
void applyEndpoint(const std::string& endpoint, launch::LaunchOptions& launch) {
  const size_t colon = endpoint.rfind(':');
  int port = 0;
  try {
    port = colon == std::string::npos ? 0 : std::stoi(endpoint.substr(colon + 1));
  } catch (const std::exception&) {
  }
  if (colon == 0 || port < 1 || port > 65535) {
    throw UserError("--rdzv-endpoint: '" + endpoint + "' is not HOST:PORT with a port from 1 to 65535");
  }
  launch.master_addr = endpoint.substr(0, colon);
  launch.master_port = port;
}

}  // namespace

void addExperimentCommand(CLI::App& app, const std::vector<std::string>& argv, int& exit_code) {
  struct Flags {
    experiments::ExperimentRequest request;
    std::vector<std::string> plugins;
    std::string rdzv_endpoint;
    int simulated_workers = 0;
  };
  auto flags = std::make_shared<Flags>();
  auto& request = flags->request;
  auto& launch = request.launch;
  auto* command = app.add_subcommand("experiment", "Run a named experiment preset (see `gcrun list`)");
  command->add_option("name", request.preset, "Preset name, e.g. fashion-powersgd-rank2")->required();
  command->add_option("--set", request.assignments, "Override a setting: key=value (repeatable)");
  command->add_option("--config", request.config_file, "YAML file of settings, applied before --set");
  command->add_option("--output-dir", request.output_dir, "Run directory (default: a new one under runs/)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  command->add_option("--nproc-per-node", launch.nproc_per_node, "Local worker processes to start")
      ->check(CLI::Range(1, 1024));
  command->add_option("--nnodes", launch.nnodes, "Machines taking part (as torchrun)")->check(CLI::Range(1, 65536));
  command->add_option("--node-rank", launch.node_rank, "This machine's index, 0 to nnodes-1")
      ->check(CLI::Range(0, 65535));
  command->add_option("--master-addr", launch.master_addr, "Host of node 0, where rank 0's store listens");
  command->add_option("--master-port", launch.master_port, "Port of rank 0's store")->check(CLI::Range(1, 65535));
  command->add_option("--rdzv-endpoint", flags->rdzv_endpoint, "HOST:PORT, the same as --master-addr and --master-port");
  command->add_option("--resume", request.resume_dir, "Continue the run in this directory from its latest checkpoint");
  command->add_option("--simulated-workers", flags->simulated_workers,
                      "Logical workers per process (distributed.simulated_workers)")
      ->check(CLI::Range(1, 4096));
  addPluginOption(*command, flags->plugins);

  command->callback([flags, &argv, &exit_code] {
    // Workers re-run this command line, so they load the same plugins.
    loadPlugins(flags->plugins);
    auto request = flags->request;
    if (!flags->rdzv_endpoint.empty()) applyEndpoint(flags->rdzv_endpoint, request.launch);
    if (flags->simulated_workers > 0) {
      request.assignments.push_back("distributed.simulated_workers=" + std::to_string(flags->simulated_workers));
    }
    request.argv = argv;
    exit_code = experiments::runExperiment(request);
  });
}

}  // namespace gcrun::cli
