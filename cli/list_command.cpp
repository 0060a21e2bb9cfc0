#include <cstdio>
#include <functional>
#include <map>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/plugins.h"
#include "experiments/setup/presets.h"
#include "experiments/setup/resolved_experiment.h"
#include "experiments/study/study.h"
#include "hyperparams/config_io.h"
#include "hyperparams/settings.h"
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
  for (const auto& key : hyperparams::knownKeys(experiments::configKeys())) {
    std::printf("  %-34s %s\n", key.key.c_str(), key.help.c_str());
    std::printf("  %-34s   accepts %s\n", "", key.accepted.c_str());
    for (const auto& alias : key.aliases) std::printf("  %-34s   alias %s\n", "", alias.c_str());
  }
}

std::string joined(const std::vector<Granularity>& items) {
  std::string out;
  for (const auto item : items) out += (out.empty() ? "" : ", ") + nameOf(item);
  return out;
}

// A wrapper's collective is that of the reducer it hands on to.
std::string collectiveOf(const reducers::ReducerSpec& spec) {
  return spec.collective ? collectiveName(*spec.collective) : "the collective of the reducer it wraps";
}

// Each reducer with what `gcrun experiment` needs to know to use it: its collective, whether it
// takes error feedback, its granularities, and the keys it reads with their defaults.
void printReducers() {
  for (const auto* entry : reducers::reducerRegistry().entries()) {
    const auto& spec = entry->factory;
    std::printf("  %-28s %s\n", entry->name.c_str(), entry->description.c_str());
    std::printf("  %-28s   %s; error feedback: %s; granularity: %s\n", "", collectiveOf(spec).c_str(),
                spec.supports_memory ? "yes" : "no (needs optimizer.memory=false)", joined(spec.granularities).c_str());
    for (const auto& setting : spec.settings) {
      std::printf("  %-28s   reducer.%s = %s\n", "", setting.name.c_str(),
                  hyperparams::formatSetting(setting.default_value).c_str());
    }
  }
}

// Each sync strategy with the sync.* keys it reads and their defaults.
void printStrategies() {
  for (const auto* entry : experiments::synchronizerRegistry().entries()) {
    std::printf("  %-28s %s\n", entry->name.c_str(), entry->description.c_str());
    for (const auto& setting : entry->factory.settings) {
      std::printf("  %-28s   sync.%s = %s\n", "", setting.name.c_str(),
                  hyperparams::formatSetting(setting.default_value).c_str());
    }
  }
}

const std::map<std::string, std::function<void()>>& listings() {
  static const std::map<std::string, std::function<void()>> table = {
      {"experiments", printPresets},
      {"studies",
       [] {
         for (const auto& study : experiments::listStudies()) {
           std::printf("  %-34s %s\n", study.name.c_str(), study.description.c_str());
         }
       }},
      {"reducers", printReducers},
      {"tasks", [] { printRegistry(tasks::taskRegistry()); }},
      {"sinks", [] { printRegistry(outputs::sinkRegistry()); }},
      {"strategies", printStrategies},
      {"keys", printKeys},
  };
  return table;
}

}  // namespace

void addListCommand(CLI::App& app) {
  auto what = std::make_shared<std::string>("experiments");
  auto plugins = std::make_shared<std::vector<std::string>>();
  std::vector<std::string> choices;
  for (const auto& kv : listings()) choices.push_back(kv.first);
  auto* command = app.add_subcommand(
      "list", "List experiments, studies, reducers, sync strategies, tasks, metric sinks or config keys");
  command->add_option("what", *what, "experiments (default), studies, reducers, strategies, tasks, sinks or keys")
      ->check(CLI::IsMember(choices));
  addPluginOption(*command, *plugins);
  command->callback([what, plugins] {
    loadPlugins(*plugins);
    listings().at (*what)();
  });
}

}  // namespace gcrun::cli
