#include <cstdio>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/plugins.h"
#include "experiments/setup/resolved_experiment.h"
#include "hyperparams/config_io.h"

namespace gcrun::cli {

void addShowCommand(CLI::App& app) {
  struct Flags {
    std::string name;
    std::vector<std::string> assignments;
    std::string config_file;
    std::vector<std::string> plugins;
    bool sources = false;
  };
  auto flags = std::make_shared<Flags>();
  auto* command = app.add_subcommand("show", "Print an experiment's resolved configuration as YAML");
  command->add_option("name", flags->name, "Preset name")->required();
  command->add_option("--set", flags->assignments, "Override a setting: key=value (repeatable)");
  command->add_option("--config", flags->config_file, "YAML file of settings, applied before --set");
  command->add_flag("--sources", flags->sources,
                    "One `key: value` line per key, with the layer it came from: default, preset, --config FILE:LINE "
                    "or --set");
  addPluginOption(*command, flags->plugins);
  command->callback([flags] {
    loadPlugins(flags->plugins);
    const auto config = experiments::layeredConfig(flags->name, flags->config_file, flags->assignments);
    const auto keys = experiments::configKeys();
    const auto yaml = flags->sources ? hyperparams::toYamlWithSources(config, keys, config.sources)
                                     : hyperparams::toYaml(config, keys);
    std::fputs(yaml.c_str(), stdout);
  });
}

}  // namespace gcrun::cli
