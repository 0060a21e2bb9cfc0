#include "cli/completion/completion.h"

#include <algorithm>

#include <CLI/CLI.hpp>

namespace gcrun::cli::completion {
namespace {

const char kSet[] = "--set";
const char kPlugin[] = "--plugin";

bool startsWith(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

const CLI::App* subcommandOf(const CLI::App& app, const std::string& name) {
  const auto found = app.get_subcommands([&](const CLI::App* command) { return command->get_name() == name; });
  return found.empty() ? nullptr : found.front();
}

std::vector<std::string> longOptions(const CLI::App& command) {
  std::vector<std::string> names;
  for (const auto* option : command.get_options()) {
    if (option->get_group().empty()) continue;  // hidden
    for (const auto& name : option->get_lnames()) names.push_back("--" + name);
  }
  return names;
}

// The option of `command` that `word` names, if it is one that takes a value.
const CLI::Option* valueOption(const CLI::App& command, const std::string& word) {
  if (!startsWith(word, "--")) return nullptr;
  for (const auto* option : command.get_options()) {
    const auto& names = option->get_lnames();
    if (option->get_type_size_max() > 0 && std::find(names.begin(), names.end(), word.substr(2)) != names.end()) {
      return option;
    }
  }
  return nullptr;
}

// --set's candidates for `text`: the keys before an '=', a key's choices after it.
std::vector<std::string> assignments(const std::string& text, const Catalogue& catalogue) {
  std::vector<std::string> out;
  const auto equals = text.find('=');
  for (const auto& key : catalogue.keys) {
    if (equals == std::string::npos) {
      out.push_back(key.key + "=");
    } else if (key.key == text.substr(0, equals)) {
      for (const auto& choice : key.choices) out.push_back(key.key + "=" + choice);
    }
  }
  return out;
}

std::vector<std::string> unfiltered(const CLI::App& app, const std::vector<std::string>& words,
                                    const Catalogue& catalogue) {
  const std::string& current = words.back();
  if (words.size() == 1) {
    if (startsWith(current, "-")) return longOptions(app);
    std::vector<std::string> names;
    for (const auto* command : app.get_subcommands([](const CLI::App*) { return true; })) {
      names.push_back(command->get_name());
    }
    return names;
  }
  const CLI::App* command = subcommandOf(app, words.front());
  if (!command) return {};
  // A subcommand's own subcommands (`bench network`): the deepest one the words name.
  for (size_t i = 1; i + 1 < words.size(); ++i) {
    const CLI::App* inner = subcommandOf(*command, words[i]);
    if (!inner) break;
    command = inner;
  }
  const std::string& previous = words[words.size() - 2];
  if (previous == kSet) return assignments(current, catalogue);
  if (startsWith(current, std::string(kSet) + "=")) {
    auto out = assignments(current.substr(sizeof(kSet)), catalogue);
    for (auto& candidate : out) candidate = std::string(kSet) + "=" + candidate;
    return out;
  }
  if (valueOption(*command, previous)) return {};
  if (startsWith(current, "-")) return longOptions(*command);
  const auto found = catalogue.positionals.find(command->get_name());
  if (found != catalogue.positionals.end()) return found->second;
  std::vector<std::string> names;
  for (const auto* inner : command->get_subcommands([](const CLI::App*) { return true; })) {
    names.push_back(inner->get_name());
  }
  return names;
}

}  // namespace

std::vector<std::string> candidates(const CLI::App& app, const std::vector<std::string>& words,
                                    const Catalogue& catalogue) {
  if (words.empty()) return {};
  auto out = unfiltered(app, words, catalogue);
  const std::string& current = words.back();
  out.erase(std::remove_if(out.begin(), out.end(), [&](const std::string& c) { return !startsWith(c, current); }),
            out.end());
  return out;
}

std::vector<std::string> pluginsOnLine(const std::vector<std::string>& words) {
  std::vector<std::string> paths;
  const std::string joined = std::string(kPlugin) + "=";
  // The last word is still being typed: no path to load yet.
  for (size_t i = 0; i + 1 < words.size(); ++i) {
    if (words[i] == kPlugin && i + 2 < words.size()) paths.push_back(words[i + 1]);
    if (startsWith(words[i], joined)) paths.push_back(words[i].substr(joined.size()));
  }
  return paths;
}

}  // namespace gcrun::cli::completion
