#include <algorithm>
#include <cstdio>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/plugins.h"
#include "experiments/reducer_benchmark.h"
#include "experiments/resolved_experiment.h"
#include "hyperparams/config_io.h"
#include "reducers/reducer.h"

namespace gcrun::cli {

void addBenchCommand(CLI::App& app) {
  struct Flags {
    std::string what;
    bool json = false;
    int repeats = 1;
    int warmup = 1;
    std::vector<std::string> models = {"resnet18"};
    std::vector<int> workers = {1, 2};
    std::vector<std::string> reducers;
    std::vector<std::string> assignments;
    std::vector<std::string> plugins;
  };
  auto flags = std::make_shared<Flags>();
  auto* command = app.add_subcommand(
      "bench", "Time every reducer on the paper's gradient shapes: ms, bytes, compression and error per step");
  command->add_option("what", flags->what, "reducers")->required()->check(CLI::IsMember({"reducers"}));
  command->add_flag("--json", flags->json, "Print JSON instead of the table");
  command->add_option("--repeats", flags->repeats, "Timed steps per reducer (median reported)")
      ->check(CLI::Range(1, 1000));
  command->add_option("--warmup", flags->warmup, "Untimed steps first")->check(CLI::Range(0, 1000));
  command->add_option("--models", flags->models, "Gradient shapes, comma-separated: resnet18, lstm (default resnet18)")
      ->delimiter(',')
      ->check(CLI::IsMember({"resnet18", "lstm"}));
  command->add_option("--workers", flags->workers, "Worker counts, comma-separated (threads in this process)")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  command->add_option("--reducer", flags->reducers, "Only this reducer (repeatable; default: all)");
  command->add_option("--set", flags->assignments,
                      "A reducer setting for all of them, e.g. reducer.rank=2 or reducer.granularity=model");
  addPluginOption(*command, flags->plugins);
  command->callback([flags] {
    loadPlugins(flags->plugins);
    const auto keys = experiments::configKeys();
    ExperimentConfig config;
    for (const auto& assignment : flags->assignments) hyperparams::applyAssignment(config, assignment, keys);
    experiments::ReducerBenchmarkOptions options;
    options.reducers = flags->reducers;
    options.world_sizes = flags->workers;
    options.warmup = flags->warmup;
    options.repeats = flags->repeats;
    options.reducer = config.reducer;
    options.seed = static_cast<uint64_t>(config.seed);

    for (const auto& name : options.reducers) reducers::reducerRegistry().at(name);  // before the header
    std::vector<std::string> notes;
    std::vector<experiments::ShapeSet> sets;
    for (auto& set : experiments::paperShapeSets(notes)) {
      if (std::find(flags->models.begin(), flags->models.end(), set.name) != flags->models.end()) {
        sets.push_back(std::move(set));
      }
    }
    if (flags->json) {
      const auto rows = experiments::benchmarkReducers(sets, options);
      std::fputs(experiments::benchmarkJson(rows, notes).c_str(), stdout);
      return;
    }
    std::fputs(experiments::formatBenchmarkHeader().c_str(), stdout);
    std::fflush(stdout);
    experiments::benchmarkReducers(sets, options, [](const experiments::ReducerBenchmarkRow& row) {
      std::fputs(experiments::formatBenchmarkRow(row).c_str(), stdout);
      std::fflush(stdout);
    });
    for (const auto& note : notes) std::printf("note: %s\n", note.c_str());
  });
}

}  // namespace gcrun::cli
