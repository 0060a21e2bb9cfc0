#include <cstdio>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "outputs/network/network_profile.h"
#include "outputs/performance/prediction_output.h"
#include "outputs/report/safe_text.h"

namespace gcrun::cli {

void addPredictCommand(CLI::App& app) {
  struct Flags {
    std::vector<std::string> inputs;
    std::vector<int> workers;
    std::vector<std::string> networks;
    std::vector<std::string> bandwidths;
    std::string latency = "20us";
    double compute_ms_per_batch = 0;
    std::string target;
    std::string output_dir = ".";
  };
  auto flags = std::make_shared<Flags>();
  auto* command = app.add_subcommand(
      "predict", "Time per batch of traced runs at other worker counts and networks: does compression pay?");
  command->add_option("dirs", flags->inputs, "Run or study directories with a step timeline (output.trace)")
      ->required();
  command->add_option("--workers", flags->workers, "Worker counts, comma-separated (default: each run's own)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 20));
  command->add_option("--network", flags->networks,
                      "A network profile (network.yaml from `gcrun bench network`, or written by hand); repeatable");
  command
      ->add_option("--bandwidth", flags->bandwidths,
                   "Links to predict on, comma-separated: 1gbit,10gbit,100gbit (default, without --network)")
      ->delimiter(',');
  command->add_option("--latency", flags->latency, "The --bandwidth links' latency (default 20us)");
  command
      ->add_option("--compute-ms-per-batch", flags->compute_ms_per_batch,
                   "Scale each run's compute (and encode/decode) to this forward+backward+optimizer time")
      ->check(CLI::PositiveNumber);
  command->add_option("--target", flags->target, "METRIC=VALUE, e.g. test.accuracy=0.9: predicted time to reach it");
  command->add_option("--output", flags->output_dir, "Where predict.md, predict.csv and plots/ go (default: .)");
  command->callback([flags] {
    performance::PredictOptions options;
    options.workers = flags->workers;
    options.compute_ms_per_batch = flags->compute_ms_per_batch;
    if (!flags->target.empty()) options.target = outputs::parseTarget(flags->target, "--target");
    for (const auto& path : flags->networks) options.networks.push_back(network::loadProfile(path));
    auto bandwidths = flags->bandwidths;
    if (bandwidths.empty() && options.networks.empty()) bandwidths = {"1gbit", "10gbit", "100gbit"};
    const double latency = network::parseDuration(flags->latency, "--latency");
    for (const auto& bandwidth : bandwidths) {
      options.networks.push_back(network::linkProfile(network::parseBandwidth(bandwidth, "--bandwidth"), latency));
    }
    const auto result = performance::predictDirectories(flags->inputs, options, flags->output_dir);
    // Names from the runs reach the terminal one line each.
    const auto table = performance::predictionTable(result.rows, options.target.has_value());
    std::fputs(outputs::markdownTable(table).c_str(), stdout);
    for (const auto& file : result.files.files) std::printf("  %s\n", outputs::oneLine(file).c_str());
    for (const auto& line : result.skipped) std::printf("skipped: %s\n", outputs::oneLine(line).c_str());
    if (!result.files.note.empty()) std::printf("note: %s\n", outputs::oneLine(result.files.note).c_str());
  });
}

}  // namespace gcrun::cli
