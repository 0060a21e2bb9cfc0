#include "experiments/setup/command_line.h"

#include <CLI/CLI.hpp>

#include "hyperparams/base/errors.h"
#include "hyperparams/base/number_flags.h"

namespace gcrun::experiments {
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

LaunchFlags::LaunchFlags(CLI::App& command) {
  auto& launch = options_;
  nproc_per_node_ = command.add_option("--nproc-per-node", launch.nproc_per_node, "Local worker processes to start")
                        ->transform(plainWholeNumber())
                        ->check(CLI::Range(1, launch::kMaxProcessesPerNode));
  command.add_option("--nnodes", launch.nnodes, "Machines taking part (as torchrun)")
      ->transform(plainWholeNumber())
      ->check(CLI::Range(1, 65536));
  command.add_option("--node-rank", launch.node_rank, "This machine's index, 0 to nnodes-1")
      ->transform(plainWholeNumber())
      ->check(CLI::Range(0, 65535));
  command.add_option("--master-addr", launch.master_addr, "Host of node 0, where rank 0's store listens");
  command.add_option("--master-port", launch.master_port, "Port of rank 0's store")
      ->transform(plainWholeNumber())
      ->check(CLI::Range(1, 65535));
  command.add_option("--rdzv-endpoint", rdzv_endpoint_, "HOST:PORT, the same as --master-addr and --master-port");
}

launch::LaunchOptions LaunchFlags::options() const {
  auto launch = options_;
  launch.nproc_per_node_given = nproc_per_node_->count() > 0;
  if (!rdzv_endpoint_.empty()) applyEndpoint(rdzv_endpoint_, launch);
  checkLaunch(launch);
  return launch;
}

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

std::vector<std::string> launchArguments(const launch::LaunchOptions& launch) {
  std::vector<std::string> arguments;
  const launch::LaunchOptions defaults;
  if (launch.nnodes != defaults.nnodes) arguments.push_back("--nnodes=" + std::to_string(launch.nnodes));
  if (launch.node_rank != defaults.node_rank) arguments.push_back("--node-rank=" + std::to_string(launch.node_rank));
  if (!launch.master_addr.empty()) arguments.push_back("--master-addr=" + launch.master_addr);
  if (launch.master_port != defaults.master_port) {
    arguments.push_back("--master-port=" + std::to_string(launch.master_port));
  }
  arguments.push_back("--nproc-per-node=" + std::to_string(launch.nproc_per_node));
  return arguments;
}

ExperimentOptions::ExperimentOptions(CLI::App& app)
    : command_(app.add_subcommand("experiment", "Run a named experiment preset (see `gcrun list`)")),
      launch_(*command_) {
  auto& request = request_;
  auto* command = command_;
  command->add_option("name", request.preset, "Preset name, e.g. fashion-powersgd-rank2")->required();
  command->add_option("--set", request.assignments, "Override a setting: key=value (repeatable)");
  command->add_option("--config", request.config_file, "YAML file of settings, applied before --set");
  command->add_option("--output-dir", request.output_dir, "Run directory (default: a new one under runs/)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  command->add_option("--resume", request.resume_dir, "Continue the run in this directory from its latest checkpoint");
  command
      ->add_option("--simulated-workers", simulated_workers_,
                   "Logical workers per process (distributed.simulated_workers)")
      ->transform(plainWholeNumber())
      ->check(CLI::Range(1, 4096));
  command->add_option("--plugin", request.plugins,
                      "Shared library whose gcrun_register() adds reducers, tasks or sinks (repeatable)");
  // gcrun's launcher to its workers only: no one types it, so no help lists it.
  command->add_option("--resolved", request.resolved_file, "The experiment as gcrun's launcher resolved it")->group("");
}

ExperimentRequest ExperimentOptions::request() const {
  auto request = request_;
  request.launch = launch_.options();
  if (simulated_workers_ > 0) {
    request.assignments.push_back("distributed.simulated_workers=" + std::to_string(simulated_workers_));
  }
  return request;
}

std::vector<std::string> experimentArguments(const ExperimentRequest& request) {
  std::vector<std::string> arguments = {"experiment"};
  const auto add = [&](const std::string& name, const std::string& value) { arguments.push_back(name + "=" + value); };
  const auto add_if_given = [&](const std::string& name, const std::string& value) {
    if (!value.empty()) add(name, value);
  };
  for (const auto& assignment : request.assignments) add("--set", assignment);
  for (const auto& plugin : request.plugins) add("--plugin", plugin);
  add_if_given("--config", request.config_file);
  add_if_given("--output-dir", request.output_dir);
  add_if_given("--resume", request.resume_dir);
  add_if_given("--resolved", request.resolved_file);
  // Last, and ending with --nproc-per-node: after an option that takes a list (--set, --plugin)
  // CLI11 reads "--" as the end of that list, and the preset would then be read as an option;
  // after one value it ends them.
  for (auto& argument : launchArguments(request.launch)) arguments.push_back(std::move(argument));
  arguments.push_back("--");
  arguments.push_back(request.preset);
  return arguments;
}

}  // namespace gcrun::experiments
