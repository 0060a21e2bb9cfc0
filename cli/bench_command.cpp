#include <algorithm>
#include <cstdio>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/plugins.h"
#include "experiments/bench/network_bench.h"
#include "experiments/bench/network_bench_command.h"
#include "experiments/bench/reducer_benchmark.h"
#include "experiments/setup/registered_keys.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/number_flags.h"
#include "hyperparams/config_io.h"
#include "reducers/reducer.h"

namespace gcrun::cli {
namespace {

struct ReducerFlags {
  bool json = false;
  int repeats = 1;
  int warmup = 1;
  std::vector<std::string> models = {"resnet18"};
  std::vector<int> workers = {1, 2};
  std::vector<std::string> reducers;
  std::vector<std::string> assignments;
  std::vector<std::string> plugins;
};

void addReducerOptions(CLI::App& command, ReducerFlags& flags) {
  // A flag of another benchmark is a mistake that runReducers names, not something to ignore.
  command.allow_extras();
  command.add_flag("--json", flags.json, "Print JSON instead of the table");
  command.add_option("--repeats", flags.repeats, "Timed steps per reducer (default 1); median reported")
      ->transform(plainWholeNumber())
      ->check(CLI::Range(1, 1000));
  command.add_option("--warmup", flags.warmup, "Untimed steps first (default 1)")
      ->transform(plainWholeNumber())
      ->check(CLI::Range(0, 1000));
  command.add_option("--models", flags.models, "Gradient shapes, comma-separated: resnet18, lstm (default resnet18)")
      ->delimiter(',')
      ->check(CLI::IsMember({"resnet18", "lstm"}));
  command.add_option("--workers", flags.workers, "Worker counts, comma-separated (threads in this process)")
      ->delimiter(',')
      ->transform(plainWholeNumber())
      ->check(CLI::Range(1, 64));
  command.add_option("--reducer", flags.reducers, "Only this reducer (repeatable; default: all)");
  command.add_option("--set", flags.assignments,
                     "A reducer setting for all of them, e.g. reducer.rank=2 or reducer.granularity=model");
  addPluginOption(command, flags.plugins);
}

void runReducers(const CLI::App& command, const ReducerFlags& flags) {
  const auto extras = command.remaining();
  if (!extras.empty()) throw UserError(extras.front() + " is not an option of `gcrun bench reducers`");
  loadPlugins(flags.plugins);
  const auto keys = experiments::configKeys();
  ExperimentConfig config;
  for (const auto& assignment : flags.assignments) hyperparams::applyAssignment(config, assignment, keys);
  experiments::ReducerBenchmarkOptions options;
  options.reducers = flags.reducers;
  options.world_sizes = flags.workers;
  options.warmup = flags.warmup;
  options.repeats = flags.repeats;
  options.reducer = config.reducer;
  options.seed = static_cast<uint64_t>(config.seed);

  for (const auto& name : options.reducers) reducers::reducerRegistry().at(name);  // before the header
  std::vector<std::string> notes;
  std::vector<experiments::ShapeSet> sets;
  for (auto& set : experiments::paperShapeSets(notes)) {
    if (std::find(flags.models.begin(), flags.models.end(), set.name) != flags.models.end()) {
      sets.push_back(std::move(set));
    }
  }
  if (flags.json) {
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
}

}  // namespace

void addBenchCommand(CLI::App& app, int& exit_code) {
  auto* bench = app.add_subcommand(
      "bench",
      "Time every reducer on the paper's gradient shapes (reducers), or calibrate the network's collectives (network)");
  bench->require_subcommand(1);
  auto flags = std::make_shared<ReducerFlags>();
  auto* reducers = bench->add_subcommand("reducers", "Time every reducer on the paper's gradient shapes");
  addReducerOptions(*reducers, *flags);
  reducers->callback([flags, reducers] { runReducers(*reducers, *flags); });
  auto network = std::make_shared<experiments::NetworkBenchOptions>(*bench);
  network->command().callback([network, &exit_code] { exit_code = experiments::runNetworkBench(network->request()); });
}

}  // namespace gcrun::cli
