#pragma once

#include <string>
#include <vector>

#include "experiments/bench/network_bench_request.h"
#include "experiments/setup/command_line.h"

namespace CLI {
class App;
}

namespace gcrun::experiments {

// `gcrun bench network`'s command line both ways, as experiments/setup/command_line.h holds
// `gcrun experiment`'s: the launcher's workers parse what networkBenchArguments writes
// (tests/experiments/command_line_test.cpp round-trips it).

// Adds the `network` subcommand and its options to `bench`; once parsed, request() is what they
// ask for. The options are bound to this object, which therefore stays put.
class NetworkBenchOptions {
 public:
  explicit NetworkBenchOptions(CLI::App& bench);
  NetworkBenchOptions(const NetworkBenchOptions&) = delete;
  NetworkBenchOptions& operator=(const NetworkBenchOptions&) = delete;

  CLI::App& command() const { return *command_; }

  // Throws UserError for a flag `gcrun bench network` does not have (another benchmark's, say),
  // a message size, collective or dtype it does not know, or a launch LaunchFlags::options() refuses.
  NetworkBenchRequest request() const;

 private:
  CLI::App* command_;
  NetworkBenchRequest request_;
  LaunchFlags launch_;
  std::string min_bytes_ = "4";
  std::string max_bytes_ = "256MiB";
  std::vector<std::string> collectives_;
  std::vector<std::string> dtypes_;
};

// The arguments after the program's name that NetworkBenchOptions parses back into `request`:
// "bench", "network", then every option as --name=value (a value that begins with a dash stays
// one argument), the launch as launchArguments writes it.
std::vector<std::string> networkBenchArguments(const NetworkBenchRequest& request);

}  // namespace gcrun::experiments
