#include <cstdio>
#include <map>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/completion/completion.h"
#include "cli/plugins.h"
#include "experiments/optimizers/optimizer.h"
#include "experiments/setup/presets.h"
#include "experiments/setup/resolved_experiment.h"
#include "experiments/study/study.h"
#include "hyperparams/base/errors.h"

namespace gcrun::cli {
namespace {

template <class Spec>
std::vector<std::string> namesIn(const Registry<Spec>& registry) {
  std::vector<std::string> names;
  for (const auto* entry : registry.entries()) names.push_back(entry->name);
  return names;
}

// The values of the keys that name an entry of a registry the key table does not build its choices
// from (it does for reducer.name, task.name, output.sinks and sync.strategy).
void addRegistryChoices(std::vector<completion::KeyChoices>& keys) {
  const std::map<std::string, std::vector<std::string>> choices = {
      {"optimizer.name", namesIn(experiments::optimizerRegistry())},
      {"optimizer.schedule", namesIn(experiments::scheduleRegistry())},
  };
  for (auto& key : keys) {
    const auto found = choices.find(key.key);
    if (found != choices.end() && key.choices.empty()) key.choices = found->second;
  }
}

// What the words on the line draw from, with the plugins it names loaded. A plugin that does not
// load leaves its keys out: completing a line says nothing, right or wrong.
completion::Catalogue catalogueFor(const std::vector<std::string>& words) {
  try {
    loadPlugins(completion::pluginsOnLine(words));
  } catch (const UserError&) {
  }
  completion::Catalogue catalogue;
  for (const auto& preset : experiments::listPresets()) {
    for (const char* command : {"experiment", "show", "plan"}) catalogue.positionals[command].push_back(preset.name);
  }
  for (const auto& study : experiments::listStudies()) catalogue.positionals["study"].push_back(study.name);
  catalogue.positionals["completion"] = {"bash", "zsh"};
  catalogue.positionals["list"] = listingNames();
  const auto keys = experiments::configKeys();
  for (const auto& spec : keys.keys()) catalogue.keys.push_back({spec.key, spec.choices});
  addRegistryChoices(catalogue.keys);
  return catalogue;
}

}  // namespace

void addCompletionCommand(CLI::App& app) {
  struct Flags {
    std::vector<std::string> arguments;
    bool words = false;
  };
  auto flags = std::make_shared<Flags>();
  auto* command = app.add_subcommand("completion", "Print the bash or zsh completion script (see docs/building.md)");
  command->add_option("shell", flags->arguments, "bash or zsh");
  // The scripts' question: the candidates for the last of the words after `gcrun`, one per line.
  command->add_flag("--words", flags->words, "Print the candidates for the words after `--`")->group("");
  command->callback([flags, &app] {
    const auto& arguments = flags->arguments;
    if (flags->words) {
      for (const auto& candidate : completion::candidates(app, arguments, catalogueFor(arguments))) {
        std::printf("%s\n", candidate.c_str());
      }
      return;
    }
    if (arguments.size() != 1) throw UserError("completion: give one shell, bash or zsh (e.g. gcrun completion bash)");
    std::fputs(completion::script(arguments.front()).c_str(), stdout);
  });
}

}  // namespace gcrun::cli
