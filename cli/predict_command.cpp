#include <cstdio>
#include <sstream>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/network_flags.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"
#include "hyperparams/base/units.h"
#include "outputs/network/network_profile.h"
#include "outputs/performance/prediction_matrix.h"
#include "outputs/performance/prediction_output.h"
#include "outputs/report/safe_text.h"

namespace gcrun::cli {
namespace {

// `gcrun predict`'s flags as given, parsed once by parseOptions.
struct PredictFlags {
  std::vector<std::string> inputs;
  std::vector<std::string> workers;
  std::vector<std::string> networks;
  std::vector<std::string> bandwidths;
  std::string latency = units::kDefaultLatency;
  std::string compute_ms_per_batch;
  bool compute_given = false;  // --compute-ms-per-batch was given (its value may be empty)
  std::string target;
  std::vector<std::string> sync_every;
  std::string target_cu;
  std::string quality_tolerance;
  std::string compute_profile = "shared";
  std::string output_dir = ".";
};

// What to predict: the runs, and the workers and networks to predict them at.
void addGridFlags(CLI::App& command, PredictFlags& flags) {
  command.add_option("dirs", flags.inputs, "Run or study directories with a step timeline (output.trace)")->required();
  command.add_option("--workers", flags.workers,
                     "Worker counts, comma-separated, each 1 to 1048576 (default: each run's own)");
  command.add_option("--network", flags.networks,
                     "A network profile (network.yaml from `gcrun bench network`, or written by hand); repeatable");
  command.add_option("--bandwidth", flags.bandwidths,
                     "Links to predict on, comma-separated, 1bit to 1000000gbit: 1gbit,10gbit,100gbit (default, "
                     "without --network)");
  command.add_option(
      "--latency", flags.latency,
      "The --bandwidth links' latency, 0s to 1000s (default " + std::string(units::kDefaultLatency) + ")");
  command.add_option("--sync-every", flags.sync_every,
                     "What-if: runs that sync models every H steps predicted at these H instead, comma-separated, "
                     "each 1 to 1000000, e.g. 1,8,32,128");
}

// How to replay the runs' compute, what to aim at, and where the files go.
void addComputeAndOutputFlags(CLI::App& command, PredictFlags& flags) {
  command.add_option("--compute-ms-per-batch", flags.compute_ms_per_batch,
                     "Scale each run's compute (and encode/decode) to this forward+backward+optimizer time "
                     "(milliseconds, above 0 up to 1000000)");
  command.add_option("--compute-profile", flags.compute_profile,
                     "shared: runs of one model and batch replay one compute time, their median (default); own: "
                     "each run its own (to check a prediction against the run's measurement)");
  command.add_option("--target-cu", flags.target_cu,
                     "Recommend, per worker count and network, the cheapest configuration whose compute "
                     "utilisation reaches this share (above 0 up to 1, e.g. 0.9)");
  command.add_option("--target", flags.target,
                     "METRIC=VALUE, e.g. test.accuracy=0.9: predicted time to reach it; the matrix then compares "
                     "time to it");
  command.add_option("--quality-tolerance", flags.quality_tolerance,
                     "How far below the best final metric a method may train and still be named fastest: a share "
                     "(0.01, the default: 1 point of accuracy, 1% of a loss), or off (speed per step alone)");
  command.add_option("--output", flags.output_dir, "Where predict.md, predict.csv and plots/ go (default: .)");
}

performance::PredictOptions parseOptions(const PredictFlags& flags) {
  performance::PredictOptions options;
  for (const auto& workers : commaItems(flags.workers, "--workers")) {
    options.workers.push_back(performance::parseWorkerCount(workers, "--workers"));
  }
  if (flags.compute_given) {
    options.compute_ms_per_batch =
        performance::parseComputeMsPerBatch(flags.compute_ms_per_batch, "--compute-ms-per-batch");
  }
  if (!flags.target.empty()) options.target = outputs::parseTarget(flags.target, "--target");
  for (const auto& every : commaItems(flags.sync_every, "--sync-every")) {
    options.sync_every.push_back(performance::parseSyncEvery(every, "--sync-every"));
  }
  if (!flags.target_cu.empty()) options.target_cu = performance::parseTargetCu(flags.target_cu, "--target-cu");
  if (!flags.quality_tolerance.empty()) {
    options.quality = performance::parseQualityTolerance(flags.quality_tolerance, "--quality-tolerance");
  }
  options.shared_compute = performance::parseComputeProfile(flags.compute_profile, "--compute-profile");
  options.networks = networksFromFlags(flags.networks, flags.bandwidths, flags.latency);
  return options;
}

// Names from the runs reach the terminal one line each: the matrices first, then every row.
void printPrediction(const performance::PredictResult& result, const performance::PredictionFiles& files,
                     bool with_target) {
  const auto table = performance::predictionTable(result.rows, with_target);
  std::fputs((performance::matrixMarkdown(result.rows, result.quality) + "\n" + outputs::markdownTable(table)).c_str(),
             stdout);
  for (const auto& file : files.files) std::printf("  %s\n", oneLine(file).c_str());
  for (const auto& line : result.skipped) std::printf("skipped: %s\n", oneLine(line).c_str());
  for (const auto& line : result.mismatches) std::printf("compute: %s\n", oneLine(line).c_str());
  for (const auto& line : result.recommendations) std::printf("recommended: %s\n", oneLine(line).c_str());
  if (!files.note.empty()) std::printf("note: %s\n", oneLine(files.note).c_str());
}

}  // namespace

void addPredictCommand(CLI::App& app) {
  auto flags = std::make_shared<PredictFlags>();
  auto* command = app.add_subcommand(
      "predict", "Time per batch of traced runs at other worker counts and networks: does compression pay?");
  addGridFlags(*command, *flags);
  addComputeAndOutputFlags(*command, *flags);
  command->callback([flags, command] {
    flags->compute_given = command->count("--compute-ms-per-batch") > 0;
    const auto options = parseOptions(*flags);
    const auto result = performance::predictDirectories(flags->inputs, options);
    const auto& [runs, timelines, untraced] = result.traced;
    const auto files = performance::writePrediction(runs, timelines, result.rows, options, flags->output_dir);
    printPrediction(result, files, options.target.has_value());
  });
}

}  // namespace gcrun::cli
