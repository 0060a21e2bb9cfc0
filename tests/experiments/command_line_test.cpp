// `gcrun experiment`'s command line both ways: every request written out by experimentArguments
// (as the launcher and a study start their children) parses back, with the CLI's own parser, into
// the same request, whatever its values hold.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include "experiments/setup/command_line.h"

namespace gcrun::experiments {
namespace {

ExperimentRequest parsed(const std::vector<std::string>& arguments) {
  CLI::App app;
  ExperimentOptions options(app);
  std::vector<const char*> argv = {"gcrun"};
  for (const auto& argument : arguments) argv.push_back(argument.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return options.request();
}

void expectSame(const ExperimentRequest& a, const ExperimentRequest& b) {
  EXPECT_EQ(a.preset, b.preset);
  EXPECT_EQ(a.config_file, b.config_file);
  EXPECT_EQ(a.assignments, b.assignments);
  EXPECT_EQ(a.output_dir, b.output_dir);
  EXPECT_EQ(a.resume_dir, b.resume_dir);
  EXPECT_EQ(a.launch.nproc_per_node, b.launch.nproc_per_node);
  EXPECT_EQ(a.launch.nnodes, b.launch.nnodes);
  EXPECT_EQ(a.launch.node_rank, b.launch.node_rank);
  EXPECT_EQ(a.launch.master_addr, b.launch.master_addr);
  EXPECT_EQ(a.launch.master_port, b.launch.master_port);
  EXPECT_EQ(a.plugins, b.plugins);
}

ExperimentRequest roundTrip(const ExperimentRequest& request) { return parsed(experimentArguments(request)); }

TEST(ExperimentCommandLine, ARequestOfDefaultsIsTheCommandAndThePreset) {
  ExperimentRequest request;
  request.preset = "fashion-sgd";
  EXPECT_EQ(experimentArguments(request),
            (std::vector<std::string>{"experiment", "--nproc-per-node=1", "--", "fashion-sgd"}));
  expectSame(roundTrip(request), request);
}

TEST(ExperimentCommandLine, EveryOptionComesBackWhateverItsValueHolds) {
  ExperimentRequest request;
  request.preset = "-a preset that looks like an option";
  request.config_file = "dir with spaces/it's \"quoted\".yaml";
  request.assignments = {"description=two words",
                         "description=a=b=c",
                         "description='single' \"double\"",
                         "description=line1\nline2",
                         "--set=looks like a flag",
                         "-x",
                         "description=",
                         "description=--"};
  request.output_dir = "--output-dir=nested";
  request.launch.nproc_per_node = 3;
  request.launch.nnodes = 2;
  request.launch.node_rank = 1;
  request.launch.master_addr = "node-0.cluster";
  request.launch.master_port = 29500;
  request.plugins = {"lib one.so", "--plugin", "-"};
  expectSame(roundTrip(request), request);
}

TEST(ExperimentCommandLine, AResumedRunComesBack) {
  ExperimentRequest request;
  request.preset = "cifar-powersgd-rank2";
  request.resume_dir = "runs/a run\twith a tab";
  request.assignments = {"training.epochs=3"};
  expectSame(roundTrip(request), request);
}

// Whichever option comes last, the preset after it is read as the preset.
TEST(ExperimentCommandLine, APresetThatLooksLikeAnOptionComesBackAfterAnyOption) {
  for (const auto& last : {"", "--set", "--plugin", "--output-dir"}) {
    ExperimentRequest request;
    request.preset = "--set=x";
    if (last == std::string("--set")) request.assignments = {"-y"};
    if (last == std::string("--plugin")) request.plugins = {"-z.so"};
    if (last == std::string("--output-dir")) request.output_dir = "-w";
    expectSame(roundTrip(request), request);
  }
}

// The shorthands a user may type are written back out in the spelling they stand for.
TEST(ExperimentCommandLine, ShorthandsComeBackAsWhatTheyMean) {
  const auto typed = parsed({"experiment", "fashion-sgd", "--rdzv-endpoint", "host:1234", "--simulated-workers", "4",
                             "--set", "seed=2", "--output-dir", "first", "--output-dir", "last"});
  EXPECT_EQ(typed.launch.master_addr, "host");
  EXPECT_EQ(typed.launch.master_port, 1234);
  EXPECT_EQ(typed.assignments, (std::vector<std::string>{"seed=2", "distributed.simulated_workers=4"}));
  EXPECT_EQ(typed.output_dir, "last");
  expectSame(roundTrip(typed), typed);
}

}  // namespace
}  // namespace gcrun::experiments
