#include <algorithm>
#include <cstdio>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/plugins.h"
#include "experiments/bench/network_bench.h"
#include "experiments/bench/reducer_benchmark.h"
#include "experiments/setup/resolved_experiment.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/number_flags.h"
#include "hyperparams/config_io.h"
#include "reducers/reducer.h"

namespace gcrun::cli {
namespace {

// The `network` flags, on the same `bench` command as the reducers' ones.
struct NetworkFlags {
  experiments::NetworkBenchRequest request;
  std::string min_bytes = "4";
  std::string max_bytes = "256MiB";
  std::vector<std::string> collectives;
};

const std::vector<std::string> kNetworkOnly = {
    "--min-bytes", "--max-bytes",      "--collectives", "--backend",   "--output",      "--name",       "--merge",
    "--timeout-s", "--nproc-per-node", "--nnodes",      "--node-rank", "--master-addr", "--master-port"};
const std::vector<std::string> kReducersOnly = {"--json", "--models", "--workers", "--reducer", "--set", "--plugin"};

// A flag of the other kind of benchmark is a mistake, not something to ignore.
void refuseFlags(const CLI::App& command, const std::string& what, const std::vector<std::string>& names) {
  for (const auto& name : names) {
    if (command.count(name) > 0) throw UserError(name + " is not an option of `gcrun bench " + what + "`");
  }
}

void addNetworkOptions(CLI::App& command, NetworkFlags& flags) {
  auto& request = flags.request;
  command.add_option("--min-bytes", flags.min_bytes, "network: smallest message, e.g. 4 or 64KiB (default 4)");
  command.add_option("--max-bytes", flags.max_bytes, "network: largest message (default 256MiB); sizes grow by 4x");
  command
      .add_option("--collectives", flags.collectives,
                  "network: all-reduce, all-gather, broadcast, comma-separated (default all)")
      ->delimiter(',');
  command.add_option("--backend", request.backend, "network: gloo or nccl (default gloo)")
      ->check(CLI::IsMember({"gloo", "nccl"}));
  command.add_option("--output", request.output, "network: the profile rank 0 writes (default network.yaml)");
  command.add_option("--name", request.name,
                     "network: the profile's name (default: a merged file's own, else the file's stem)");
  command.add_flag("--merge", request.merge, "network: keep the fits of --output that this run does not replace");
  command.add_option("--timeout-s", request.timeout_s, "network: how long a collective may wait for a peer")
      ->transform(plainWholeNumber())
      ->check(CLI::Range(1, 86400));
  auto& launch = request.launch;
  command.add_option("--nproc-per-node", launch.nproc_per_node, "network: local worker processes to start")
      ->transform(plainWholeNumber())
      ->check(CLI::Range(1, 1024));
  command.add_option("--nnodes", launch.nnodes, "network: machines taking part (as torchrun)")
      ->transform(plainWholeNumber())
      ->check(CLI::Range(1, 65536));
  command.add_option("--node-rank", launch.node_rank, "network: this machine's index, 0 to nnodes-1")
      ->transform(plainWholeNumber())
      ->check(CLI::Range(0, 65535));
  command.add_option("--master-addr", launch.master_addr, "network: host of node 0, where rank 0's store listens");
  command.add_option("--master-port", launch.master_port, "network: port of rank 0's store")
      ->transform(plainWholeNumber())
      ->check(CLI::Range(1, 65535));
}

int runNetwork(const CLI::App& command, NetworkFlags& flags, int repeats, int warmup) {
  refuseFlags(command, "network", kReducersOnly);
  auto request = flags.request;
  auto& plan = request.plan;
  plan.min_bytes = experiments::parseMessageBytes(flags.min_bytes, "--min-bytes");
  plan.max_bytes = experiments::parseMessageBytes(flags.max_bytes, "--max-bytes");
  if (command.count("--repeats") > 0) plan.repeats = repeats;
  plan.warmup = warmup;
  if (!flags.collectives.empty()) plan.collectives.clear();
  for (const auto& name : flags.collectives) {
    const auto collective = network::parseCollective(name, "--collectives");
    if (std::find(plan.collectives.begin(), plan.collectives.end(), collective) == plan.collectives.end()) {
      plan.collectives.push_back(collective);
    }
  }
  return experiments::runNetworkBench(request);
}

}  // namespace

void addBenchCommand(CLI::App& app, int& exit_code) {
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
      "bench",
      "Time every reducer on the paper's gradient shapes (reducers), or calibrate the network's collectives (network)");
  command->add_option("what", flags->what, "reducers or network")
      ->required()
      ->check(CLI::IsMember({"reducers", "network"}));
  command->add_flag("--json", flags->json, "Print JSON instead of the table");
  command
      ->add_option("--repeats", flags->repeats,
                   "Timed steps per reducer (default 1), timed runs per message size (default 5); median reported")
      ->transform(plainWholeNumber())
      ->check(CLI::Range(1, 1000));
  command->add_option("--warmup", flags->warmup, "Untimed steps (runs per message size) first")
      ->transform(plainWholeNumber())
      ->check(CLI::Range(0, 1000));
  command->add_option("--models", flags->models, "Gradient shapes, comma-separated: resnet18, lstm (default resnet18)")
      ->delimiter(',')
      ->check(CLI::IsMember({"resnet18", "lstm"}));
  command->add_option("--workers", flags->workers, "Worker counts, comma-separated (threads in this process)")
      ->delimiter(',')
      ->transform(plainWholeNumber())
      ->check(CLI::Range(1, 64));
  command->add_option("--reducer", flags->reducers, "Only this reducer (repeatable; default: all)");
  command->add_option("--set", flags->assignments,
                      "A reducer setting for all of them, e.g. reducer.rank=2 or reducer.granularity=model");
  addPluginOption(*command, flags->plugins);
  auto network = std::make_shared<NetworkFlags>();
  addNetworkOptions(*command, *network);
  command->callback([flags, network, command, &exit_code] {
    if (flags->what == "network") {
      exit_code = runNetwork(*command, *network, flags->repeats, flags->warmup);
      return;
    }
    refuseFlags(*command, "reducers", kNetworkOnly);
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
