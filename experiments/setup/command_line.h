#pragma once

#include <string>
#include <vector>

#include "experiments/launch/launcher.h"
#include "experiments/setup/request.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace gcrun::experiments {

// The child command lines of the commands that start processes of gcrun, each beside its parser
// (`gcrun experiment` here, `gcrun bench network` in experiments/bench/network_bench_command.h), so
// that a child parses exactly what its parent meant: tests/experiments/command_line_test.cpp
// round-trips both.

// The torchrun-like options of a command that starts this node's workers: --nproc-per-node,
// --nnodes, --node-rank, --master-addr, --master-port and --rdzv-endpoint, bound to this object,
// which therefore stays put. One binding for `gcrun experiment` and `gcrun bench network`.
class LaunchFlags {
 public:
  explicit LaunchFlags(CLI::App& command);
  LaunchFlags(const LaunchFlags&) = delete;
  LaunchFlags& operator=(const LaunchFlags&) = delete;

  // Once parsed: --rdzv-endpoint HOST:PORT becomes the master address and port, and the launch is
  // checked (checkLaunch). Throws UserError for an endpoint that is not HOST:PORT or a launch that
  // checkLaunch refuses.
  launch::LaunchOptions options() const;

 private:
  launch::LaunchOptions options_;
  std::string rdzv_endpoint_;
  CLI::Option* nproc_per_node_ = nullptr;
};

// Throws UserError for a launch no node could take part in: a node rank not below --nnodes, or
// several nodes without node 0's address and port.
void checkLaunch(const launch::LaunchOptions& launch);

// LaunchFlags' options as --name=value, those at their default left out but --nproc-per-node,
// which comes last.
std::vector<std::string> launchArguments(const launch::LaunchOptions& launch);

// Adds the `experiment` subcommand and its options to `app`; once app.parse() has run, request()
// is what they ask for. The options are bound to this object, which therefore stays put.
class ExperimentOptions {
 public:
  explicit ExperimentOptions(CLI::App& app);
  ExperimentOptions(const ExperimentOptions&) = delete;
  ExperimentOptions& operator=(const ExperimentOptions&) = delete;

  CLI::App& command() const { return *command_; }

  // The launch as LaunchFlags::options() says, --simulated-workers N the assignment
  // distributed.simulated_workers=N after the others.
  ExperimentRequest request() const;

 private:
  CLI::App* command_;
  ExperimentRequest request_;
  LaunchFlags launch_;
  int simulated_workers_ = 0;
};

// The arguments after the program's name that ExperimentOptions parses back into `request`:
// "experiment", the options as --name=value (so that a value may begin with a dash or hold '=',
// spaces, quotes or newlines: it is one argument, never split), those left at their default left
// out but --nproc-per-node, then "--" and the preset, which may begin with a dash too.
std::vector<std::string> experimentArguments(const ExperimentRequest& request);

}  // namespace gcrun::experiments
