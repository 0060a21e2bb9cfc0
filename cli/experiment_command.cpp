#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "experiments/launcher.h"
#include "experiments/presets.h"
#include "experiments/runner.h"
#include "hyperparams/errors.h"
#include "outputs/run_files.h"
#include "reducers/process_group.h"

namespace gcrun::cli {

void addExperimentCommand(CLI::App& app, const std::vector<std::string>& argv, int& exit_code) {
  struct Flags {
    std::string name;
    std::vector<std::string> assignments;
    std::string config_file;
    std::string output_dir;
    int nproc_per_node = 1;
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

  command->callback([flags, &argv, &exit_code] {
    const auto config = experiments::resolveExperiment(flags->name, flags->config_file, flags->assignments);
    experiments::RunOptions options{flags->output_dir};
    if (reducers::launchedByLauncher() || flags->nproc_per_node == 1) {
      experiments::runWorker(config, options);
      return;
    }
    // The launcher: check everything the workers would reject, make the run directory once, and
    // hand it to every worker.
    experiments::checkConfig(config);
    std::vector<std::string> worker_argv = argv;
    worker_argv.push_back("--output-dir");
    worker_argv.push_back(outputs::createRunDirectory(flags->output_dir, config.experiment));
    exit_code = experiments::launchLocalWorkers(flags->nproc_per_node, worker_argv);
  });
}

}  // namespace gcrun::cli
