// gcrun predict, report --predict and bench network --merge on traces, run.json files, network
// profiles and flags from other people, through the binary: what they hold is data. Huge traces
// cost time and memory linear in their events, YAML bombs and absurd numbers are refused where
// they are read, and every refusal is one line naming the file or flag and what is accepted.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/command.h"
#include "tests/support/temp_dir.h"

namespace gcrun {
namespace {

using testing::CommandResult;
using testing::contains;
using testing::runCommand;
using testing::TempDir;

const std::string kGcrun = GCRUN_BINARY_PATH;

// The binary under 3 GiB of data and 20 s, as the other hostile-input tests run it.
CommandResult bounded(const std::string& arguments) {
  return runCommand("ulimit -d 3145728 && timeout 20 " + kGcrun + " " + arguments);
}

// Exit 2 and exactly one line, gcrun's error line, naming each of `parts`.
void expectRefused(const CommandResult& result, const std::vector<std::string>& parts,
                   const std::string& prefix = "gcrun: error: ") {
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_EQ(result.output.rfind(prefix, 0), 0u) << result.output;
  EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1) << result.output;
  for (const auto& part : parts) EXPECT_TRUE(contains(result.output, part)) << part << "\n" << result.output;
}

std::string write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

// One worker's trace file as the recorder writes it, by hand: `steps` steps of 1 ms (forward,
// backward, reduce, optimizer and batch spans), each with one blocking collective in its reduce.
// Overlapping: every step spans the same window, so each step's window holds every collective.
struct TraceSpec {
  int rank = 0;
  int64_t steps = 3;
  bool overlapping = false;
  std::string kind = "all-reduce";
  uint64_t bytes = 4000;
};

std::string traceText(const TraceSpec& spec) {
  const std::string where = "\"pid\": " + std::to_string(spec.rank) + ", \"tid\": " + std::to_string(spec.rank);
  std::string events = "{\"name\": \"thread_name\", \"ph\": \"M\", " + where + ", \"args\": {\"name\": \"w\"}}";
  const int64_t length = spec.overlapping ? 1000 * spec.steps : 1000;
  for (int64_t step = 1; step <= spec.steps; ++step) {
    const int64_t base = spec.overlapping ? 0 : 1000 * (step - 1);
    const auto span = [&](const char* name, int64_t from, int64_t to) {
      events += ",\n{\"name\": \"" + std::string(name) + "\", \"cat\": \"phase\", \"ph\": \"X\", " + where +
                ", \"ts\": " + std::to_string(base + from) + ", \"dur\": " + std::to_string(to - from) +
                ", \"args\": {\"step\": " + std::to_string(step) + "}}";
    };
    span("batch", 0, length);
    span("forward", 0, 100);
    span("backward", 100, 500);
    span("reduce", 500, length - 100);
    span("optimizer", length - 100, length);
    const std::string ts = std::to_string(base + 510);
    const std::string id = std::to_string(step);
    events +=
        ",\n{\"name\": \"c\", \"cat\": \"collective\", \"ph\": \"b\", " + where + ", \"ts\": " + ts +
        ", \"id\": " + id + ", \"args\": {\"kind\": \"" + spec.kind + "\", \"bytes\": " + std::to_string(spec.bytes) +
        ", \"group_size\": 2, \"step\": " + std::to_string(step) + ", \"async\": false, \"wait_us\": " + ts + "}}";
    events += ",\n{\"name\": \"c\", \"cat\": \"collective\", \"ph\": \"e\", " + where +
              ", \"ts\": " + std::to_string(base + 520) + ", \"id\": " + id + "}";
  }
  return "{\"traceEvents\": [" + events +
         "],\n\"otherData\": {\"gcrun_trace\": 1, \"rank\": " + std::to_string(spec.rank) +
         ", \"world_size\": 2, \"reducer\": \"exact\", \"backend\": \"gloo\"}}\n";
}

// A completed run directory of `world_size` workers with these trace files.
std::string runDirectory(const TempDir& dir, const std::string& name, int world_size,
                         const std::vector<std::string>& traces) {
  const auto run = dir.file(name);
  std::filesystem::create_directories(run);
  write(run + "/run.json", "{\"status\": \"completed\", \"world_size\": " + std::to_string(world_size) + "}\n");
  for (size_t rank = 0; rank < traces.size(); ++rank) {
    write(run + "/trace-rank" + std::to_string(rank) + ".json", traces[rank]);
  }
  return run;
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  return text.replace(text.find(from), from.size(), to);
}

// A hand-written link, as people write one.
const char kLink[] = "bandwidth: 1gbit\nlatency: 20us\n";
const char kFit[] = "fits:\n  - {collective: all-reduce, world_size: 2, latency_s: 2e-05, seconds_per_byte: 1e-09}\n";

// --- item 5: work and memory linear in the trace ---

TEST(HostilePredict, OverlappingStepsOfManyCollectivesArePredictedInLinearTime) {
  TempDir dir;
  // 10,000 steps whose windows all overlap and 10,000 collectives (~9 MB): copied into every
  // step's program, they would be 10^8.
  const auto run = runDirectory(dir, "overlap", 2, {traceText({0, 10000, true})});
  const auto start = std::chrono::steady_clock::now();
  const auto predicted = bounded("predict " + run + " --bandwidth 1gbit --output " + dir.file("out"));
  EXPECT_EQ(predicted.exit_code, 0) << predicted.output;
  EXPECT_TRUE(contains(predicted.output, "| overlap |  | 2 | 1gbit/20us |")) << predicted.output;
  const auto report =
      bounded("report " + run + " --predict workers=16,bandwidth=1gbit --format csv --output " + dir.file("report"));
  EXPECT_EQ(report.exit_code, 0) << report.output;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));
}

// --- item 6: network.yaml's aliases counted ---

TEST(HostilePredict, ANetworkProfileThatIsAYamlBombIsRefusedAtOnce) {
  TempDir dir;
  const auto run = runDirectory(dir, "run", 2, {traceText({})});
  // One fit of 10,000 samples, aliased 90,000 times: under 1 MiB, standing for 1.8 * 10^9 numbers.
  std::string bomb =
      "fits:\n  - &fit {collective: all-reduce, world_size: 2, latency_s: 0, seconds_per_byte: 0, "
      "samples: [";
  for (int k = 1; k <= 10000; ++k) bomb += (k > 1 ? ",[" : "[") + std::to_string(4 * k) + ",1]";
  bomb += "]}\n";
  for (int k = 0; k < 90000; ++k) bomb += "  - *fit\n";
  const auto file = write(dir.file("bomb.yaml"), bomb);
  const std::vector<std::string> expected = {file, "more than 10000 values once its YAML aliases are expanded"};
  const auto start = std::chrono::steady_clock::now();
  expectRefused(bounded("predict " + run + " --network " + file + " --output " + dir.file("out")), expected);
  expectRefused(bounded("report " + run + " --predict workers=16,network=" + file), expected);
  // Refused before any worker starts to measure.
  expectRefused(bounded("bench network --merge --output " + file + " --nproc-per-node 2"), expected);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// --- item 9: bad trace data is the file's fault, exit 2 naming it ---

TEST(HostilePredict, BadTraceDataIsOneLineNamingTheFile) {
  TempDir dir;
  const auto no_workers = runDirectory(dir, "no-workers", 0, {traceText({})});
  const auto out = " --output " + dir.file("out");
  expectRefused(bounded("predict " + no_workers + out), {no_workers + "/run.json", "world_size 0", "1 to 1048576"});

  const auto differ = runDirectory(dir, "differ", 2, {traceText({0}), traceText({1, 3, false, "all-reduce", 8})});
  expectRefused(bounded("predict " + differ + out),
                {differ + "/trace-rank1.json", "step 1", differ + "/trace-rank0.json"});

  const auto unknown = runDirectory(dir, "unknown", 2, {traceText({0, 3, false, "all-to-all"})});
  expectRefused(bounded("predict " + unknown + out), {unknown + "/trace-rank0.json", "all-to-all", "all-reduce"});
}

// --- item 10: absurd numbers refused where they are read, with the accepted range ---

TEST(HostilePredict, AbsurdTraceNumbersAreRefusedWithTheirRange) {
  TempDir dir;
  const auto trace = traceText({});
  for (const auto& [from, to] :
       std::vector<std::pair<std::string, std::string>>{{"\"ts\": 0", "\"ts\": 1e308"},
                                                        {"\"dur\": 400", "\"dur\": 1e308"},
                                                        {"\"ts\": 100", "\"ts\": -1"},
                                                        {"\"bytes\": 4000", "\"bytes\": 1e20"}}) {
    const auto run = runDirectory(dir, "absurd", 2, {replaced(trace, from, to)});
    expectRefused(bounded("predict " + run + " --output " + dir.file("out")), {run + "/trace-rank0.json", " to "});
  }
}

TEST(HostilePredict, AbsurdNetworkNumbersAreRefusedWithTheirRange) {
  TempDir dir;
  const auto run = runDirectory(dir, "run", 2, {traceText({})});
  const auto predict = [&](const std::string& flags) {
    return bounded("predict " + run + " " + flags + " --output " + dir.file("out"));
  };
  expectRefused(predict("--bandwidth 1e-300bit"), {"--bandwidth", "1e-300bit", "1bit to 1000000gbit"});
  expectRefused(predict("--bandwidth 1e300gbit"), {"--bandwidth", "1e300gbit", "1bit to 1000000gbit"});
  expectRefused(predict("--latency 1e308s"), {"--latency", "1e308s", "0s to 1000s"});
  expectRefused(bounded("report " + run + " --predict workers=2,bandwidth=1gbit,latency=1e308s"),
                {"--predict", "1e308s", "0s to 1000s"});
  const std::vector<std::pair<std::string, std::string>> profiles = {
      {"bandwidth: 1gbit\nlatency: 1e308s\n", "0s to 1000s"},
      {"bandwidth: 1e-300bit\nlatency: 20us\n", "1bit to 1000000gbit"},
      {replaced(kFit, "latency_s: 2e-05", "latency_s: 1e308"), "from 0 to 1000"},
      {replaced(kFit, "seconds_per_byte: 1e-09", "seconds_per_byte: 1e300"), "from 0 to 8"},
  };
  for (const auto& [yaml, range] : profiles) {
    const auto file = write(dir.file("absurd.yaml"), yaml);
    expectRefused(predict("--network " + file), {file, range});
  }
}

TEST(HostilePredict, ComputeTimesAreFinitePositiveAndBounded) {
  TempDir dir;
  const auto run = runDirectory(dir, "run", 2, {traceText({})});
  for (const char* value : {"nan", "inf", "-1", "0", "1e308"}) {
    expectRefused(bounded("predict " + run + " --compute-ms-per-batch " + value + " --output " + dir.file("out")),
                  {"--compute-ms-per-batch", value, "above 0 up to 1000000"});
    expectRefused(bounded("report " + run + " --predict workers=2,bandwidth=1gbit,compute_ms=" + value),
                  {"--predict compute_ms", value, "above 0 up to 1000000"});
  }
}

// --- item 10: lists without holes, numbers in plain decimal ---

TEST(HostilePredict, OnlyPlainDecimalsAndWholeListsAreRead) {
  TempDir dir;
  const auto run = runDirectory(dir, "run", 2, {traceText({})});
  const auto predict = [&](const std::string& flags) {
    return bounded("predict " + run + " " + flags + " --output " + dir.file("out"));
  };
  expectRefused(predict("--workers 2,,3"), {"--workers", "'2,,3' has an empty item"});
  expectRefused(predict("--bandwidth 1gbit,,10gbit"), {"--bandwidth", "empty item"});
  expectRefused(predict("--workers 0x10"), {"--workers", "0x10", "1 to 1048576"});
  expectRefused(predict("--bandwidth 0x10gbit"), {"--bandwidth", "0x10gbit"});
  expectRefused(predict("--latency 0x1p-10s"), {"--latency", "0x1p-10s"});
  expectRefused(bounded("report " + run + " --predict workers=0x10,bandwidth=1gbit"), {"--predict workers", "0x10"});
  expectRefused(bounded("report " + run + " --predict workers=2,bandwidth=1gbit,compute_ms=0x10"),
                {"--predict compute_ms", "0x10"});
  const auto hex = write(dir.file("hex.yaml"), replaced(kFit, "latency_s: 2e-05", "latency_s: 0x10"));
  expectRefused(predict("--network " + hex), {hex, "fits[0].latency_s", "0x10"});
  // CLI11 reads these flags itself: its one line, naming the flag.
  expectRefused(bounded("bench network --nproc-per-node 0x2"), {"--nproc-per-node", "0x2"}, "gcrun: ");
}

TEST(HostilePredict, AKeyGivenTwiceInANetworkProfileIsRefused) {
  TempDir dir;
  const auto run = runDirectory(dir, "run", 2, {traceText({})});
  const auto twice = write(dir.file("twice.yaml"), std::string(kLink) + "bandwidth: 1bit\n");
  expectRefused(bounded("predict " + run + " --network " + twice + " --output " + dir.file("out")),
                {twice, "bandwidth", "given twice"});
  const auto nested = write(dir.file("nested.yaml"),
                            std::string(kLink) + "collectives:\n  all-gather: {latency: 1us, latency: 1000s}\n");
  expectRefused(bounded("predict " + run + " --network " + nested + " --output " + dir.file("out")),
                {nested, "collectives.all-gather.latency", "given twice"});
  expectRefused(bounded("bench network --merge --output " + twice + " --nproc-per-node 2"), {twice, "given twice"});
}

// --- item 10: what a file is, and which command speaks ---

TEST(HostilePredict, AFifoOrADeviceIsNotARegularFile) {
  TempDir dir;
  const auto run = runDirectory(dir, "run", 2, {traceText({})});
  ASSERT_EQ(::mkfifo(dir.file("fifo.yaml").c_str(), 0644), 0);
  for (const auto& file : {dir.file("fifo.yaml"), std::string("/dev/zero")}) {
    expectRefused(bounded("predict " + run + " --network " + file + " --output " + dir.file("out")),
                  {file, "not a regular file"});
  }
  expectRefused(bounded("bench network --merge --output " + dir.file("fifo.yaml") + " --nproc-per-node 2"),
                {dir.file("fifo.yaml"), "not a regular file"});
  const auto fifo_trace = runDirectory(dir, "fifo-trace", 2, {});
  ASSERT_EQ(::mkfifo((fifo_trace + "/trace-rank0.json").c_str(), 0644), 0);
  expectRefused(bounded("predict " + fifo_trace + " --output " + dir.file("out")),
                {fifo_trace + "/trace-rank0.json", "not a regular file"});
}

TEST(HostilePredict, PredictNamesItselfNotReport) {
  TempDir dir;
  const auto result = bounded("predict " + dir.file("missing") + " --output " + dir.file("out"));
  expectRefused(result, {dir.file("missing"), "is not a directory"});
  EXPECT_FALSE(contains(result.output, "report:")) << result.output;
}

// --- issue 41: a run's config.yaml and a profile's name are data too ---

// An unknown strategy was taken as a name and sync.every -5 as 1: refused naming the file and key.
TEST(HostilePredict, ARunsSyncSettingsAreCheckedNamingTheFileAndKey) {
  TempDir dir;
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"sync:\n  strategy: nope\n", {"/config.yaml: sync.strategy 'nope'", "every-step, local-sgd"}},
      {"sync:\n  strategy: diloco\n  every: -5\n", {"/config.yaml: sync.every is '-5'", "1 to 1000000"}},
      {"sync:\n  strategy: diloco\n  every: 0x10\n", {"/config.yaml: sync.every is '0x10'"}},
      {"sync:\n  strategy: streaming-diloco\n  every: 4\n  fragments: 9\n",
       {"/config.yaml: sync.fragments is '9'", "1 to 4"}}};
  for (const auto& [config, expected] : cases) {
    SCOPED_TRACE(config);
    const auto run = runDirectory(dir, "run", 2, {traceText({})});
    write(run + "/config.yaml", config);
    expectRefused(bounded("predict " + run + " --bandwidth 1gbit --output " + dir.file("out")), expected);
  }
}

// run.json's recorded schedule is data too: one that no strategy could declare is refused, naming
// the file and the field, before anything is predicted from it.
TEST(HostilePredict, ARecordedScheduleIsCheckedNamingTheFileAndField) {
  TempDir dir;
  const std::string rest =
      "\"periodic\": true, \"fragments\": 1, \"delay\": 0, \"overlapped\": false, "
      "\"warmup_steps\": 0";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[1]", "schedule is not an object"},
      {"{\"strategy\": \"diloco\", \"every\": 0, " + rest + "}", "schedule.every is 0"},
      {"{\"strategy\": \"diloco\", \"every\": 4, \"periodic\": true, \"fragments\": 9, \"delay\": 0, "
       "\"overlapped\": false, \"warmup_steps\": 0}",
       "schedule.fragments is 9; expected a whole number from 1 to 4"},
      {"{\"strategy\": \"\\u001b]0;pwned\\u0007\", \"every\": 4, " + rest + "}",
       "schedule.strategy is not a strategy's name"},
  };
  for (const auto& [schedule, expected] : cases) {
    SCOPED_TRACE(schedule);
    const auto run = runDirectory(dir, "run", 2, {traceText({})});
    write(run + "/run.json", "{\"status\": \"completed\", \"world_size\": 2, \"schedule\": " + schedule + "}\n");
    expectRefused(bounded("predict " + run + " --bandwidth 1gbit --output " + dir.file("out")),
                  {run + "/run.json: " + expected});
  }
}

// A profile with no cost for the run's data type: the message named only the profile's `name`,
// which is whatever the file says; it names the file.
TEST(HostilePredict, AProfileWithoutTheRunsDataTypeIsNamedByItsFile) {
  TempDir dir;
  const auto run = runDirectory(dir, "run", 2, {traceText({})});
  const auto file = write(dir.file("half.yaml"),
                          "name: lab\nfits:\n  - {collective: all-reduce, dtype: float16, world_size: 2, "
                          "latency_s: 2e-05, seconds_per_byte: 1e-09}\n");
  expectRefused(bounded("predict " + run + " --network " + file + " --output " + dir.file("out")),
                {file + " (network profile 'lab') gives no cost for all-reduce in float32"});
}

}  // namespace
}  // namespace gcrun
