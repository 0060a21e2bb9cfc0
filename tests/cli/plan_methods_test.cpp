// `gcrun plan` asks the registrations: a strategy or task that declares no plan is refused naming
// its key, and streaming-diloco's fragments are the strategy's own (SyncPlan::fragments), so each
// fragment's planned bits are what its sync sends in a run.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "cli/plan_methods.h"
#include "experiments/sync/synchronizer.h"
#include "hyperparams/base/errors.h"
#include "tasks/task.h"
#include "tests/support/command.h"
#include "tests/support/metric_values.h"
#include "tests/support/temp_dir.h"

namespace {

using gcrun::testing::metricValues;
using gcrun::testing::readFile;
using gcrun::testing::runCommand;
using gcrun::testing::TempDir;

// What planConfigurations() refuses of `assignments` over fashion-sgd, or "" when it plans them.
std::string planRefusal(const std::vector<std::string>& assignments) {
  TempDir dir;
  std::ofstream(dir.file("one.yaml")) << "- {name: one, set: {}}\n";
  gcrun::cli::PlanRequest request;
  request.preset = "fashion-sgd";
  request.assignments = assignments;
  request.configurations_file = dir.file("one.yaml");
  try {
    gcrun::cli::planConfigurations(request);
  } catch (const gcrun::UserError& e) {
    return e.what();
  }
  return "";
}

TEST(PlanMethods, RefusesAStrategyOrTaskThatDeclaresNoPlan) {
  auto strategy = gcrun::experiments::synchronizerRegistry().at("every-step").factory;
  strategy.plan = {};
  gcrun::experiments::synchronizerRegistry().add("unplanned", "every-step without a plan", strategy);
  auto task = gcrun::tasks::taskRegistry().at("fashion-mnist").factory;
  task.plan = {};
  gcrun::tasks::taskRegistry().add("unplanned-task", "fashion-mnist without a plan", task);

  EXPECT_EQ(planRefusal({"task.synthetic=true"}), "");
  const auto strategy_refusal = planRefusal({"task.synthetic=true", "sync.strategy=unplanned"});
  EXPECT_NE(strategy_refusal.find("sync.strategy: gcrun plan cannot model 'unplanned'"), std::string::npos)
      << strategy_refusal;
  EXPECT_NE(strategy_refusal.find("demo, diloco, every-step, local-sgd, sparseloco, streaming-diloco"),
            std::string::npos)
      << strategy_refusal;
  const auto task_refusal = planRefusal({"task.synthetic=true", "task.name=unplanned-task"});
  EXPECT_NE(task_refusal.find("task.name: gcrun plan cannot build 'unplanned-task'"), std::string::npos)
      << task_refusal;
}

// A GPT with biases (modules of two tensors of unequal sizes; the model's tensors dealt round-robin
// would make other fragments) in F = 3 fragments every H = 4 steps: fragment p sends after step
// sendOffset(p, 3, 4), steps 1, 2 and 4, so a 4-step run reports the three in fragment order.
TEST(PlanMethods, EachStreamingFragmentSendsWhatThePlanSays) {
  TempDir dir;
  const std::vector<std::string> sets = {
      "task.synthetic=true",  "training.batch_size=8", "task.test_batch_size=500",
      "output.sinks=[jsonl]", "training.max_steps=4",  "distributed.simulated_workers=2",
      "task.layers=2",        "task.width=32",         "task.heads=2",
      "task.context=16",      "task.bias=true",        "sync.strategy=streaming-diloco",
      "sync.every=4",         "sync.fragments=3",      "sync.delay=0"};
  std::ofstream(dir.file("streaming.yaml")) << "- {name: streaming, set: {}}\n";
  gcrun::cli::PlanRequest request;
  request.preset = "brown-gpt-nanogpt";
  request.assignments = sets;
  request.configurations_file = dir.file("streaming.yaml");
  const auto planned = gcrun::cli::planConfigurations(request);
  ASSERT_EQ(planned.methods.size(), 1u);
  const auto& fragments = planned.methods[0].message_bits;
  ASSERT_EQ(fragments.size(), 3u);

  std::string command = std::string("timeout 300 ") + GCRUN_BINARY_PATH + " experiment brown-gpt-nanogpt";
  for (const auto& set : sets) command += " --set " + set;
  const auto run = runCommand(command + " --output-dir " + dir.file("run"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(metricValues(readFile(dir.file("run/metrics.jsonl")), "bits_per_sync"), fragments);
}

}  // namespace
