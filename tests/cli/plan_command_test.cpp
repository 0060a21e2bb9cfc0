// `gcrun plan` through the binary: the parameter count of the shape-only model is what `gcrun
// experiment` builds, the planned bits per step are what a short run of every planned reducer and
// strategy sends, the files are written, and bad input is one line and exit 2 before anything.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "tests/support/command.h"
#include "tests/support/metric_values.h"
#include "tests/support/refusal.h"
#include "tests/support/temp_dir.h"

namespace {

using gcrun::testing::contains;
using gcrun::testing::expectRefused;
using gcrun::testing::metricValues;
using gcrun::testing::readFile;
using gcrun::testing::runCommand;
using gcrun::testing::TempDir;

const std::string kGcrun = GCRUN_BINARY_PATH;
const std::string kLimit = "timeout 300 ";
const std::string kTiny =
    " --set task.synthetic=true --set training.batch_size=8 --set task.test_batch_size=500"
    " --set output.sinks=[jsonl] --set training.max_steps=2 --set distributed.simulated_workers=2";
const std::string kGpt = " --set task.layers=2 --set task.width=32 --set task.heads=2 --set task.context=16";

// A number after `"key": ` in run.json.
double jsonNumber(const std::string& json, const std::string& key) {
  std::smatch match;
  const std::regex pattern("\"" + key + "\": *([0-9.e+]+)");
  if (!std::regex_search(json, match, pattern)) return -1;
  return std::stod(match[1]);
}

// plan.csv's cell `column` of the row of `configuration` whose network is `network`.
std::string csvCell(const std::string& csv, const std::string& configuration, const std::string& column) {
  std::stringstream lines(csv);
  std::string header, line;
  std::getline(lines, header);
  std::vector<std::string> names;
  std::stringstream header_cells(header);
  for (std::string cell; std::getline(header_cells, cell, ',');) names.push_back(cell);
  while (std::getline(lines, line)) {
    std::vector<std::string> cells;
    std::stringstream row(line);
    for (std::string cell; std::getline(row, cell, ',');) cells.push_back(cell);
    if (cells.empty() || cells[0] != configuration || cells[10] != "") continue;
    for (size_t i = 0; i < names.size() && i < cells.size(); ++i) {
      if (names[i] == column) return cells[i];
    }
  }
  return "";
}

class PlanCommand : public ::testing::Test {
 protected:
  TempDir dir_;
};

// Every registered task with every architecture it takes: fashion-mnist (cnn, resnet18), cifar10
// (resnet18, vgg16), wikitext2 (lstm, its synthetic vocabulary), language-model (gpt, with biases).
TEST_F(PlanCommand, CountsTheParametersGcrunExperimentBuilds) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"fashion-sgd", " --set task.architecture=cnn"},
      {"fashion-resnet18-powersgd-rank2", " --set task.architecture=resnet18"},
      {"cifar-sgd", " --set task.architecture=resnet18"},
      {"cifar-sgd", " --set task.architecture=vgg16"},
      {"wikitext-sgd",
       " --set task.architecture=lstm --set evaluation.max_samples=512 --set task.synthetic_samples=4096"},
      {"brown-gpt-nanogpt", kGpt + " --set task.bias=true"},
  };
  // One configuration: the default grid's 4 streaming fragments are more than the LSTM's 3 modules.
  std::ofstream(dir_.file("every-step.yaml")) << "- {name: every-step, set: {}}\n";
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& [preset, sets] = cases[i];
    const auto run_dir = dir_.file("case" + std::to_string(i));
    const auto run = runCommand(kLimit + kGcrun + " experiment " + preset + kTiny + sets + " --output-dir " + run_dir);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    const auto plan = runCommand(kLimit + kGcrun + " plan " + preset + kTiny + sets + " --workers 2 --cu-targets 0.5" +
                                 " --configurations " + dir_.file("every-step.yaml") + " --no-codec-time --output " +
                                 run_dir + "-plan");
    ASSERT_EQ(plan.exit_code, 0) << plan.output;
    const auto built = jsonNumber(readFile(run_dir + "/run.json"), "num_parameters");
    EXPECT_TRUE(contains(plan.output, preset + ": " + std::to_string(int64_t(built)) + " parameters")) << plan.output;
  }
}

using Assignments = std::vector<std::pair<std::string, std::string>>;

// The settings a reducer's plan-against-run check needs: powersgd-ddp past its warm-up from the
// first step (start_iter 0 needs the hook's error feedback and warm start off).
Assignments reducerAssignments(const std::string& reducer) {
  Assignments assignments = {{"reducer.name", reducer}};
  if (reducer == "powersgd-ddp") {
    assignments.insert(
        assignments.end(),
        {{"reducer.start_iter", "0"}, {"reducer.error_feedback", "false"}, {"reducer.warm_start", "false"}});
  }
  return assignments;
}

// Every reducer under every-step, and exact, fp16, bf16, powersgd, fp8, fp4 and int8 under diloco
// and streaming-diloco too, two steps of two simulated workers: the bits the run counted are the
// plan's bits per step times the steps (diloco and streaming-diloco sync every 2 steps,
// streaming-diloco in 2 fragments: both fragments send once; unbiased-rank's two steps are a P
// and a Q call). The every-step plan is made in buckets of 4 KiB, so that the bits of a reducer
// whose message covers the whole step (whole_step: global-topk, signum, qsgd, fp4, ...) are shared
// between buckets and must still add up to what the run sends. The other reducers' diloco plan
// sizes the whole model in one call, as planned_bits_test checks against reduce(); running them
// all under every strategy would take minutes. local-sgd (a warm-up of 0: it averages after step
// 1), sparseloco and demo with exact; each sync the run reports sends the plan's bits per sync.
TEST_F(PlanCommand, PlansTheBitsARunSends) {
  std::vector<std::pair<std::string, Assignments>> configurations;
  const std::vector<std::string> periodic = {"exact", "fp16", "bf16", "powersgd", "fp8", "fp4", "int8"};
  for (const std::string reducer :
       {"exact",        "fp16",          "bf16",         "powersgd", "fp8",      "fp4",          "int8",
        "powersgd-ddp", "unbiased-rank", "svd",          "atomo",    "signum",   "sign-norm",    "topk",
        "global-topk",  "random-k",      "random-block", "qsgd",     "terngrad", "two-bit-topk", "dct-topk"}) {
    const auto own = reducerAssignments(reducer);
    auto every_step = own;
    every_step.push_back({"reducer.bucket_mb", "0.004"});
    configurations.push_back({"every-step-" + reducer, every_step});
    if (std::find(periodic.begin(), periodic.end(), reducer) == periodic.end()) continue;
    auto diloco = own;
    diloco.insert(diloco.end(), {{"sync.strategy", "diloco"}, {"sync.every", "2"}});
    configurations.push_back({"diloco-" + reducer, diloco});
    auto streaming = own;
    streaming.insert(
        streaming.end(),
        {{"sync.strategy", "streaming-diloco"}, {"sync.every", "2"}, {"sync.fragments", "2"}, {"sync.delay", "0"}});
    configurations.push_back({"streaming-" + reducer, streaming});
  }
  configurations.push_back(
      {"local-sgd-exact", {{"sync.strategy", "local-sgd"}, {"sync.every", "2"}, {"sync.warmup_steps", "0"}}});
  configurations.push_back({"sparseloco-exact", {{"sync.strategy", "sparseloco"}, {"sync.every", "2"}}});
  configurations.push_back({"demo-exact",
                            {{"sync.strategy", "demo"},
                             {"optimizer.name", "sgd"},
                             {"optimizer.momentum", "0"},
                             {"optimizer.momentum_type", "heavy-ball"},
                             {"optimizer.clip_norm", "0"}}});
  std::string yaml;
  for (const auto& [name, sets] : configurations) {
    yaml += "- name: " + name + "\n  set:\n";
    for (const auto& [key, value] : sets) yaml += "    " + key + ": " + value + "\n";
  }
  std::ofstream(dir_.file("configurations.yaml")) << yaml;
  const auto plan = runCommand(kLimit + kGcrun + " plan brown-gpt-nanogpt" + kTiny + kGpt + " --configurations " +
                               dir_.file("configurations.yaml") +
                               " --workers 2 --cu-targets 0.5 --no-codec-time --output " + dir_.file("plan"));
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  const auto csv = readFile(dir_.file("plan/plan.csv"));
  for (const auto& [name, sets] : configurations) {
    std::string assignments;
    for (const auto& [key, value] : sets) assignments += " --set " + key + "=" + value;
    const auto run_dir = dir_.file(name);
    const auto run = runCommand(kLimit + kGcrun + " experiment brown-gpt-nanogpt" + kTiny + kGpt + assignments +
                                " --output-dir " + run_dir);
    ASSERT_EQ(run.exit_code, 0) << name << run.output;
    const double sent = jsonNumber(readFile(run_dir + "/run.json"), "bits_sent");
    EXPECT_EQ(sent, 2 * std::stod(csvCell(csv, name, "bits_per_step"))) << name;
    // streaming-diloco's fragments differ; their bits are plan_methods_test's.
    if (name.rfind("streaming-", 0) == 0) continue;
    for (double bits : metricValues(readFile(run_dir + "/metrics.jsonl"), "bits_per_sync")) {
      EXPECT_EQ(bits, std::stod(csvCell(csv, name, "bits_per_sync"))) << name;
    }
  }
}

TEST_F(PlanCommand, WritesTheMatrixTheTableAndTheCsv) {
  const auto plan = runCommand(kLimit + kGcrun + " plan brown-gpt-nanogpt" + kGpt + " --workers 2,8 --bandwidth 1gbit" +
                               " --cu-targets 0.5,0.9 --no-codec-time --output " + dir_.file("plan"));
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  EXPECT_TRUE(contains(plan.output, "| diloco-fp4 | 8 |")) << plan.output;
  const auto md = readFile(dir_.file("plan/plan.md"));
  EXPECT_LT(md.find("CU 0.9: Gbit/s"), md.find("## Per network"));
  EXPECT_LT(md.find("## Per network"), md.find("## Assumptions"));
  const auto csv = readFile(dir_.file("plan/plan.csv"));
  EXPECT_EQ(csv.rfind("configuration,strategy,reducer,sync_every,fragments,delay,workers,network,step_ms,cu,"
                      "cu_target,bandwidth_gbit",
                      0),
            0u);
  // 13 configurations x 2 worker counts, each on one network and at two targets, and the header.
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 13 * 2 * (1 + 2));
}

// The codec's time, timed on this machine, lengthens fp8's syncs (and more at --codec-scale 1000);
// exact's codec costs nothing; --no-codec-time leaves it out and says so.
TEST_F(PlanCommand, TimesTheCodecsUnlessToldNot) {
  std::ofstream(dir_.file("fp8.yaml"))
      << "- {name: fp8, set: {sync.strategy: diloco, sync.every: 2, reducer.name: fp8}}\n"
         "- {name: exact, set: {sync.strategy: diloco, sync.every: 2}}\n";
  const std::string plan = kLimit + kGcrun + " plan brown-gpt-nanogpt" + kGpt + " --configurations " +
                           dir_.file("fp8.yaml") + " --workers 2 --bandwidth 100gbit --step-time 1ms --cu-targets 0.5";
  std::map<std::string, std::string> csv;
  for (const std::string codec : {"--no-codec-time", "--codec-scale 1", "--codec-scale 1000"}) {
    const auto output = dir_.file("plan" + std::to_string(csv.size()));
    const auto run = runCommand(plan + " " + codec + " --output " + output);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    csv[codec] = readFile(output + "/plan.csv");
    EXPECT_EQ(contains(readFile(output + "/plan.md"), "codec time: each exchange"), codec != "--no-codec-time");
  }
  const auto step = [&](const std::string& codec, const std::string& configuration) {
    return std::stod(csvCell(csv[codec], configuration, "step_ms"));
  };
  EXPECT_LT(step("--no-codec-time", "fp8"), step("--codec-scale 1", "fp8"));
  EXPECT_LT(step("--codec-scale 1", "fp8"), step("--codec-scale 1000", "fp8"));
  EXPECT_EQ(step("--no-codec-time", "exact"), step("--codec-scale 1000", "exact"));
}

TEST_F(PlanCommand, RefusesBadInputInOneLineBeforePlanning) {
  const std::string plan = kLimit + kGcrun + " plan brown-gpt-nanogpt --output " + dir_.file("refused");
  expectRefused(runCommand(plan + " --step-time 0ms"), "--step-time");
  expectRefused(runCommand(plan + " --device-flops 1e15 --mfu 1.5"), "--mfu");
  expectRefused(runCommand(plan + " --device-flops 1e15 --mfu 0"), "--mfu");
  expectRefused(runCommand(plan + " --cu-targets 0.5,1"), "--cu-targets");
  expectRefused(runCommand(plan + " --cu-targets 0"), "--cu-targets");
  expectRefused(runCommand(plan + " --codec-scale 0"), "--codec-scale");
  expectRefused(runCommand(plan + " --codec-scale -1 --no-codec-time"), "--codec-scale");
  expectRefused(runCommand(plan + " --set task.heads=3"), "task.heads");
  expectRefused(runCommand(plan + " --set task.no_such_key=1"), "task.no_such_key");
  expectRefused(runCommand(plan + " --set task.width=100000000 --set task.layers=1000000"), "1e15 parameters");
  std::ofstream(dir_.file("demo.yaml")) << "- {name: demo, set: {sync.strategy: demo}}\n";
  expectRefused(runCommand(plan + " --configurations " + dir_.file("demo.yaml")), "optimizer.name");
  expectRefused(runCommand(kLimit + kGcrun + " plan fashion-sgd --device-flops 1e15 --mfu 0.5"), "--device-flops");
  EXPECT_FALSE(std::filesystem::exists(dir_.file("refused")));
}

// task.vocabulary_size sizes a plan where the data would decide the vocabulary, and nothing else:
// required there, refused where it disagrees with the settings' or the data's vocabulary.
TEST_F(PlanCommand, TakesTheVocabularyFromTaskVocabularySize) {
  const std::string plan = kLimit + kGcrun + " plan wikitext-sgd --workers 2 --cu-targets 0.5 --output ";
  expectRefused(runCommand(plan + dir_.file("none")), "task.vocabulary_size");
  EXPECT_NE(runCommand(plan + dir_.file("flag") + " --vocabulary-size 28869").exit_code, 0);
  // The reference's LSTM at WikiText-2's V = 28,869 (tasks/models/rnn_model.h); its 3 modules
  // cannot make the default grid's 4 streaming fragments.
  std::ofstream(dir_.file("every-step.yaml")) << "- {name: every-step, set: {}}\n";
  const auto given = runCommand(plan + dir_.file("given") + " --set task.vocabulary_size=28869 --configurations " +
                                dir_.file("every-step.yaml"));
  ASSERT_EQ(given.exit_code, 0) << given.output;
  EXPECT_TRUE(contains(given.output, "wikitext-sgd: 28949319 parameters")) << given.output;
  expectRefused(runCommand(kLimit + kGcrun + " plan brown-gpt-nanogpt" + kTiny + " --set task.vocabulary_size=7" +
                           " --output " + dir_.file("synthetic")),
                "task.vocabulary_size");
  expectRefused(runCommand(kLimit + kGcrun + " plan wikitext-sgd --set task.vocabulary_size=-1"),
                "task.vocabulary_size");
  // A run reads its data: three words and <eos> here, so 7 is not its vocabulary.
  const auto data = dir_.file("words");
  std::filesystem::create_directories(data);
  for (const std::string split : {"train", "valid", "test"}) {
    std::ofstream(data + "/wiki." + split + ".tokens") << "the cat sat\nthe cat\n";
  }
  expectRefused(runCommand(kLimit + kGcrun + " experiment wikitext-sgd --set task.data_dir=" + data +
                           " --set task.vocabulary_size=7 --output-dir " + dir_.file("run")),
                "task.vocabulary_size");
  EXPECT_FALSE(std::filesystem::exists(dir_.file("synthetic")));
}

}  // namespace
