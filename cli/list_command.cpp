#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>

#include <yaml-cpp/yaml.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/plugins.h"
#include "experiments/optimizers/optimizer.h"
#include "experiments/setup/presets.h"
#include "experiments/setup/resolved_experiment.h"
#include "experiments/study/study.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/config.h"
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

// Text for a markdown table cell: a '|' would end the cell and a '<' open an HTML tag.
std::string cell(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '<') {
      out += "&lt;";
    } else {
      out += c;
    }
  }
  return out;
}

std::string code(const std::string& text) { return "`" + cell(text) + "`"; }

std::string flowYaml(const YAML::Node& node) {
  if (node.IsNull()) return "null";
  YAML::Emitter out;
  out.SetSeqFormat(YAML::Flow);
  out.SetMapFormat(YAML::Flow);
  out << node;
  return out.c_str();
}

// Each declared setting's key ("reducer.rank") with its default for each owner that declares it,
// owners of one default together: "`4` (powersgd, unbiased-rank); `1` (powersgd-ddp)".
template <class Spec>
void addDeclaredDefaults(const std::string& section, const Registry<Spec>& registry,
                         std::map<std::string, std::vector<std::pair<std::string, std::string>>>& by_key) {
  for (const auto* entry : registry.inOrderAdded()) {
    for (const auto& setting : entry->factory.settings) {
      auto& defaults = by_key[section + "." + setting.name];
      const auto value = code(hyperparams::formatSetting(setting.default_value));
      auto same = std::find_if(defaults.begin(), defaults.end(), [&](const auto& d) { return d.first == value; });
      if (same == defaults.end()) {
        defaults.push_back({value, entry->name});
      } else {
        same->second += ", " + entry->name;
      }
    }
  }
}

std::map<std::string, std::string> declaredDefaults() {
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> by_key;
  addDeclaredDefaults("reducer", reducers::reducerRegistry(), by_key);
  addDeclaredDefaults("task", tasks::taskRegistry(), by_key);
  addDeclaredDefaults("output", outputs::sinkRegistry(), by_key);
  addDeclaredDefaults("sync", experiments::synchronizerRegistry(), by_key);
  std::map<std::string, std::string> text;
  for (const auto& [key, defaults] : by_key) {
    for (const auto& [value, owners] : defaults) {
      text[key] += (text[key].empty() ? "" : "; ") + value + " (" + owners + ")";
    }
  }
  return text;
}

// The key table as a markdown table, one row per key in the order config.yaml writes them: a
// built-in key's default is that of an empty configuration, a declared setting's that of each
// owner (reducer, task, sink, strategy) that reads it.
void printKeysMarkdown() {
  const auto keys = experiments::configKeys();
  const auto declared = declaredDefaults();
  const ExperimentConfig defaults;
  std::printf("| key | default | accepts | meaning |\n|---|---|---|---|\n");
  for (const auto& spec : keys.keys()) {
    const auto found = declared.find(spec.key);
    const std::string value = found != declared.end() ? found->second : code(flowYaml(spec.get(defaults)));
    std::string meaning = cell(spec.help);
    std::string aliases;
    for (const auto& alias : keys.aliases()) {
      if (alias.key == spec.key) aliases += (aliases.empty() ? "" : ", ") + code(alias.alias);
    }
    if (!aliases.empty()) meaning += " Alias: " + aliases + ".";
    std::printf("| %s | %s | %s | %s |\n", code(spec.key).c_str(), value.c_str(), cell(spec.accepted).c_str(),
                meaning.c_str());
  }
}

// The optimizers (optimizer.name) and the learning-rate schedules (optimizer.schedule).
void printOptimizers() {
  printRegistry(experiments::optimizerRegistry());
  std::printf("schedules (optimizer.schedule):\n");
  printRegistry(experiments::scheduleRegistry());
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
      {"optimizers", printOptimizers},
      {"keys", printKeys},
  };
  return table;
}

}  // namespace

std::vector<std::string> listingNames() {
  std::vector<std::string> names;
  for (const auto& kv : listings()) names.push_back(kv.first);
  return names;
}

void addListCommand(CLI::App& app) {
  struct Flags {
    std::string what = "experiments";
    std::vector<std::string> plugins;
    bool markdown = false;
  };
  auto flags = std::make_shared<Flags>();
  auto* command = app.add_subcommand(
      "list", "List experiments, studies, reducers, sync strategies, optimizers, tasks, metric sinks or config keys");
  command
      ->add_option("what", flags->what,
                   "experiments (default), studies, reducers, strategies, optimizers, tasks, sinks or keys")
      ->check(CLI::IsMember(listingNames()));
  command->add_flag("--markdown", flags->markdown, "keys only: print the key table as a markdown table");
  addPluginOption(*command, flags->plugins);
  command->callback([flags] {
    if (flags->markdown && flags->what != "keys") {
      throw UserError("list: --markdown prints the key table only (gcrun list keys --markdown), not " + flags->what);
    }
    loadPlugins(flags->plugins);
    if (flags->markdown) {
      printKeysMarkdown();
    } else {
      listings().at(flags->what)();
    }
  });
}

}  // namespace gcrun::cli
