#include <cstdio>
#include <functional>
#include <map>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "experiments/presets.h"
#include "hyperparams/config_io.h"
#include "outputs/metric_sink.h"
#include "reducers/reducer.h"
#include "tasks/task.h"

namespace gcrun::cli {
namespace {

template <class Factory>
void printRegistry(const Registry<Factory>& registry) {
  for (const auto* entry : registry.entries()) {
    std::printf("  %-28s %s\n", entry->name.c_str(), entry->description.c_str());
  }
}

void printPresets() {
  for (const auto& preset : experiments::listPresets()) {
    std::printf("  %-34s %s\n", preset.name.c_str(), preset.description.c_str());
  }
}

void printKeys() {
  for (const auto& key : hyperparams::knownKeys()) {
    std::printf("  %-34s %s\n", key.key.c_str(), key.help.c_str());
    std::printf("  %-34s   accepts %s\n", "", key.accepted.c_str());
    for (const auto& alias : key.aliases) std::printf("  %-34s   alias %s\n", "", alias.c_str());
  }
}

const std::map<std::string, std::function<void()>>& listings() {
  static const std::map<std::string, std::function<void()>> table = {
      {"experiments", printPresets},
      {"reducers", [] { printRegistry(reducers::reducerRegistry()); }},
      {"tasks", [] { printRegistry(tasks::taskRegistry()); }},
      {"sinks", [] { printRegistry(outputs::sinkRegistry()); }},
      {"keys", printKeys},
  };
  return table;
}

}  // namespace

void addListCommand(CLI::App& app) {
  auto what = std::make_shared<std::string>("experiments");
  std::vector<std::string> choices;
  for (const auto& kv : listings()) choices.push_back(kv.first);
  auto* command = app.add_subcommand("list", "List experiments, reducers, tasks, metric sinks or config keys");
  command->add_option("what", *what, "experiments (default), reducers, tasks, sinks or keys")
      ->check(CLI::IsMember(choices));
  command->callback([what] { listings().at(*what)(); });
}

}  // namespace gcrun::cli
