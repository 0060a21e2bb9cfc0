#include <memory>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/plugins.h"
#include "experiments/experiment.h"
#include "experiments/setup/command_line.h"

namespace gcrun::cli {

void addExperimentCommand(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<experiments::ExperimentOptions>(app);
  options->command().callback([options, &exit_code] {
    const auto request = options->request();
    // Workers and a study's runs get the same --plugin options, so they load the same plugins.
    loadPlugins(request.plugins);
    // A worker of gcrun's launcher starts from what the launcher resolved, not from settings.
    exit_code =
        request.resolved_file.empty() ? experiments::runExperiment(request) : experiments::runLaunchedWorker(request);
  });
}

}  // namespace gcrun::cli
