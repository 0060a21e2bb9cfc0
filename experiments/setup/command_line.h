#pragma once

#include <string>
#include <vector>

#include "experiments/setup/request.h"

namespace CLI {
class App;
}

namespace gcrun::experiments {

// `gcrun experiment`'s command line, both ways, so that every process that starts a run (the
// launcher its workers, a study its runs) hands over the request it resolved in the one spelling
// the CLI parses.

// Adds the `experiment` subcommand and its options to `app`; once app.parse() has run, request()
// is what they ask for. The options are bound to this object, which therefore stays put.
class ExperimentOptions {
 public:
  explicit ExperimentOptions(CLI::App& app);
  ExperimentOptions(const ExperimentOptions&) = delete;
  ExperimentOptions& operator=(const ExperimentOptions&) = delete;

  CLI::App& command() const { return *command_; }

  // --rdzv-endpoint HOST:PORT becomes the master address and port, --simulated-workers N the
  // assignment distributed.simulated_workers=N after the others. Throws UserError for an endpoint
  // that is not HOST:PORT.
  ExperimentRequest request() const;

 private:
  CLI::App* command_;
  ExperimentRequest request_;
  std::string rdzv_endpoint_;
  int simulated_workers_ = 0;
};

// The arguments after the program's name that ExperimentOptions parses back into `request`:
// "experiment", the options as --name=value (so that a value may begin with a dash or hold '=',
// spaces, quotes or newlines: it is one argument, never split), those left at their default left
// out but --nproc-per-node, then "--" and the preset, which may begin with a dash too.
std::vector<std::string> experimentArguments(const ExperimentRequest& request);

}  // namespace gcrun::experiments
