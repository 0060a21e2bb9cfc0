#include "experiments/bench/network_bench_command.h"

#include <algorithm>

#include <CLI/CLI.hpp>

#include "hyperparams/base/errors.h"
#include "hyperparams/base/number_flags.h"

namespace gcrun::experiments {

NetworkBenchOptions::NetworkBenchOptions(CLI::App& bench)
    : command_(bench.add_subcommand("network", "Calibrate the network's collectives (a profile for gcrun predict)")),
      launch_(*command_) {
  auto& request = request_;
  auto* command = command_;
  // A flag of another benchmark is a mistake that request() names, not something to ignore.
  command->allow_extras();
  command->add_option("--min-bytes", min_bytes_, "Smallest message, e.g. 4 or 64KiB (default 4)");
  command->add_option("--max-bytes", max_bytes_,
                      "Largest message (default 256MiB); sizes grow by 4x, in each series until a message takes "
                      "over 3 s unless --full-sweep");
  command->add_flag("--full-sweep", request.plan.full_sweep,
                    "Time every size up to --max-bytes, however long the link takes");
  command->add_option("--collectives", collectives_, "all-reduce, all-gather, broadcast, comma-separated (default all)")
      ->delimiter(',');
  command
      ->add_option("--dtypes", dtypes_,
                   "What the all-reduce is timed in: float32, float16, bfloat16, comma-separated (default all)")
      ->delimiter(',');
  command->add_option("--repeats", request.plan.repeats, "Timed runs per message size (default 5); median reported")
      ->transform(plainWholeNumber())
      ->check(CLI::Range(1, 1000));
  command->add_option("--warmup", request.plan.warmup, "Untimed runs per message size first (default 1)")
      ->transform(plainWholeNumber())
      ->check(CLI::Range(0, 1000));
  command->add_option("--backend", request.backend, "gloo or nccl (default gloo)")
      ->check(CLI::IsMember({"gloo", "nccl"}));
  command->add_option("--output", request.output, "The profile rank 0 writes (default network.yaml)");
  command->add_option("--name", request.name,
                      "The profile's name (default: a merged file's own, else the file's stem)");
  command->add_flag("--merge", request.merge, "Keep the fits of --output that this run does not replace");
  command->add_option("--timeout-s", request.timeout_s, "How long a collective may wait for a peer")
      ->transform(plainWholeNumber())
      ->check(CLI::Range(1, 86400));
}

NetworkBenchRequest NetworkBenchOptions::request() const {
  const auto extras = command_->remaining();
  if (!extras.empty()) throw UserError(extras.front() + " is not an option of `gcrun bench network`");
  auto request = request_;
  request.launch = launch_.options();
  auto& plan = request.plan;
  plan.min_bytes = parseMessageBytes(min_bytes_, "--min-bytes");
  plan.max_bytes = parseMessageBytes(max_bytes_, "--max-bytes");
  if (!collectives_.empty()) plan.collectives.clear();
  for (const auto& name : collectives_) {
    const auto collective = network::parseCollective(name, "--collectives");
    if (std::find(plan.collectives.begin(), plan.collectives.end(), collective) == plan.collectives.end()) {
      plan.collectives.push_back(collective);
    }
  }
  if (!dtypes_.empty()) plan.dtypes.clear();
  for (const auto& name : dtypes_) {
    const auto dtype = parseReductionType(name, "--dtypes");
    if (std::find(plan.dtypes.begin(), plan.dtypes.end(), dtype) == plan.dtypes.end()) plan.dtypes.push_back(dtype);
  }
  return request;
}

std::vector<std::string> networkBenchArguments(const NetworkBenchRequest& request) {
  const auto& plan = request.plan;
  std::string collectives;
  for (const auto collective : plan.collectives) {
    collectives += (collectives.empty() ? "" : ",") + collectiveName(collective);
  }
  std::string dtypes;
  for (const auto dtype : plan.dtypes) dtypes += (dtypes.empty() ? "" : ",") + dataTypeName(dtype);
  std::vector<std::string> arguments = {"bench",
                                        "network",
                                        "--min-bytes=" + std::to_string(plan.min_bytes),
                                        "--max-bytes=" + std::to_string(plan.max_bytes),
                                        "--warmup=" + std::to_string(plan.warmup),
                                        "--repeats=" + std::to_string(plan.repeats),
                                        "--collectives=" + collectives,
                                        "--dtypes=" + dtypes,
                                        "--backend=" + request.backend,
                                        "--timeout-s=" + std::to_string(request.timeout_s),
                                        "--output=" + request.output};
  if (!request.name.empty()) arguments.push_back("--name=" + request.name);
  if (request.merge) arguments.push_back("--merge");
  if (plan.full_sweep) arguments.push_back("--full-sweep");
  for (auto& argument : launchArguments(request.launch)) arguments.push_back(std::move(argument));
  return arguments;
}

}  // namespace gcrun::experiments
