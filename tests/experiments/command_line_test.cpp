// The child command lines both ways: every request written out by experimentArguments (as the
// launcher and a study start their children) or networkBenchArguments (as `gcrun bench network`
// starts its workers) parses back, with the CLI's own parser, into the same request, whatever its
// values hold.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include "experiments/bench/network_bench_command.h"
#include "experiments/setup/command_line.h"
#include "hyperparams/base/errors.h"
#include "tests/support/user_error.h"

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
  EXPECT_EQ(a.resolved_file, b.resolved_file);
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

// What gcrun's launcher hands a worker: the file it resolved, never the user's --set.
TEST(ExperimentCommandLine, ALaunchersWorkerComesBackWithItsResolvedFile) {
  ExperimentRequest request;
  request.preset = "fashion-sgd";
  request.resolved_file = "/tmp/gcrun-x/resolved.yaml";
  request.resume_dir = "runs/r";
  request.plugins = {"lib.so"};
  request.launch.nproc_per_node = 2;
  const auto arguments = experimentArguments(request);
  EXPECT_EQ(std::count_if(arguments.begin(), arguments.end(), [](const auto& a) { return a.rfind("--set", 0) == 0; }),
            0);
  expectSame(roundTrip(request), request);
}

NetworkBenchRequest parsedBench(const std::vector<std::string>& arguments) {
  CLI::App app;
  auto* bench = app.add_subcommand("bench");
  NetworkBenchOptions options(*bench);
  std::vector<const char*> argv = {"gcrun"};
  for (const auto& argument : arguments) argv.push_back(argument.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return options.request();
}

void expectSameBench(const NetworkBenchRequest& a, const NetworkBenchRequest& b) {
  EXPECT_EQ(a.plan.min_bytes, b.plan.min_bytes);
  EXPECT_EQ(a.plan.max_bytes, b.plan.max_bytes);
  EXPECT_EQ(a.plan.warmup, b.plan.warmup);
  EXPECT_EQ(a.plan.repeats, b.plan.repeats);
  EXPECT_EQ(a.plan.collectives, b.plan.collectives);
  EXPECT_EQ(a.plan.dtypes, b.plan.dtypes);
  EXPECT_EQ(a.plan.full_sweep, b.plan.full_sweep);
  EXPECT_EQ(a.backend, b.backend);
  EXPECT_EQ(a.timeout_s, b.timeout_s);
  EXPECT_EQ(a.output, b.output);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.merge, b.merge);
  EXPECT_EQ(a.launch.nproc_per_node, b.launch.nproc_per_node);
  EXPECT_EQ(a.launch.nnodes, b.launch.nnodes);
  EXPECT_EQ(a.launch.node_rank, b.launch.node_rank);
  EXPECT_EQ(a.launch.master_addr, b.launch.master_addr);
  EXPECT_EQ(a.launch.master_port, b.launch.master_port);
}

TEST(NetworkBenchCommandLine, ARequestOfDefaultsComesBack) {
  const NetworkBenchRequest request;
  expectSameBench(parsedBench(networkBenchArguments(request)), request);
}

TEST(NetworkBenchCommandLine, EveryOptionComesBackWhateverItsValueHolds) {
  NetworkBenchRequest request;
  request.plan.min_bytes = 64;
  request.plan.max_bytes = 1 << 20;
  request.plan.warmup = 0;
  request.plan.repeats = 7;
  request.plan.collectives = {CollectiveKind::broadcast, CollectiveKind::all_reduce};
  request.plan.dtypes = {DataType::bfloat16, DataType::float32};
  request.plan.full_sweep = true;
  request.backend = "nccl";
  request.timeout_s = 60;
  request.output = "-dir with spaces/net=work.yaml";
  request.name = "--name=looks like a flag";
  request.merge = true;
  request.launch.nproc_per_node = 4;
  request.launch.nnodes = 3;
  request.launch.node_rank = 2;
  request.launch.master_addr = "node-0.cluster";
  request.launch.master_port = 29500;
  expectSameBench(parsedBench(networkBenchArguments(request)), request);
}

// --rdzv-endpoint reaches the workers as the address and port it stands for, and the launch flags
// are experiment's own, checked the same way.
TEST(NetworkBenchCommandLine, TheLaunchFlagsAreExperimentsOwn) {
  const auto typed = parsedBench({"bench", "network", "--nnodes", "2", "--rdzv-endpoint", "host:1234"});
  EXPECT_EQ(typed.launch.master_addr, "host");
  EXPECT_EQ(typed.launch.master_port, 1234);
  expectSameBench(parsedBench(networkBenchArguments(typed)), typed);
  EXPECT_NO_THROW(checkLaunch(typed.launch));
  auto unreachable = typed.launch;
  unreachable.master_addr.clear();
  EXPECT_THROW(checkLaunch(unreachable), UserError);
  EXPECT_THROW(parsedBench({"bench", "network", "--models", "lstm"}), UserError);
}

TEST(NetworkBenchCommandLine, DtypesAreTheReductionTypesOnceEach) {
  EXPECT_EQ(parsedBench({"bench", "network", "--dtypes", "float16,float32,float16"}).plan.dtypes,
            (std::vector<DataType>{DataType::float16, DataType::float32}));
  for (const char* bad : {"float8", "uint8", "fp16"}) {
    testing::expectMessageHas(testing::userErrorOf([&] {
                                parsedBench({"bench", "network", "--dtypes", bad});
                              }),
                              {"--dtypes", std::string("'") + bad + "'", "float32, float16 or bfloat16"});
  }
}

}  // namespace
}  // namespace gcrun::experiments
