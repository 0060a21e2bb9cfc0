#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "reducers/planned_bits.h"
#include "reducers/reducer.h"
#include "tests/support/multi_rank.h"
#include "tests/support/reducer_fixtures.h"

// `gcrun plan`'s message sizes (reducers/planned_bits.h) against the bits reduce() returns, for
// every registered reducer that plans, at two world sizes. A reducer that cannot plan is named in
// kUnplanned, so that a new reducer is a decision rather than a silent gap.

namespace gcrun::reducers {
namespace {

// A conv kernel, a matrix, a vector, a tall matrix and a 1x1: every path of the low-rank split,
// odd element counts for the packed codes, a tensor of more than one scale block.
const std::vector<std::vector<int64_t>> kShapes = {{6, 3, 2, 2}, {12, 5}, {7}, {300, 2}, {1, 1}};

// Every built-in reducer plans: even those that sample (atomo's atoms, random-k's indices) or pick
// by value (top-k) send a number of elements fixed by the shapes. What cannot plan is a reducer
// whose spec does not say, like this test's own plugin (UnsizedPluginIsNamedAndRefused).
const std::set<std::string> kUnplanned = {"unsized-plugin"};

// Settings that take a reducer straight past its warm-up: powersgd-ddp's start_iter (1000 by
// default) needs its error feedback and warm start off to be 0, as PowerSGDState requires.
SettingValues afterWarmUp(const std::string& name) {
  if (name != "powersgd-ddp") return {};
  return {{"start_iter", int64_t{0}}, {"error_feedback", false}, {"warm_start", false}};
}

// What rank 0's reduce() of random gradients of kShapes returns over two calls at `world` ranks:
// two, for the reducers whose calls alternate (unbiased-rank's P and Q).
uint64_t sentBits(const std::string& name, const ReducerOptions& options, int world) {
  uint64_t rank0_bits = 0;
  testing::runRanks(world, [&](comm::Communicator& comm) {
    auto reducer = testing::buildReducer(name, comm, options);
    uint64_t bits = 0;
    for (int call = 0; call < 2; ++call) {
      std::vector<at::Tensor> send, out, memory;
      torch::manual_seed(7 + comm.rank() + 10 * call);
      for (const auto& shape : kShapes) {
        send.push_back(torch::randn(shape));
        out.push_back(torch::zeros(shape));
        memory.push_back(torch::zeros(shape));
      }
      bits += reducer->reduce(send, out, memory);
    }
    if (comm.rank() == 0) rank0_bits = bits;
  });
  return rank0_bits;
}

ReducerOptions optionsOf(const std::string& name, SettingValues settings) {
  ReducerOptions options;
  options.name = name;
  options.settings = afterWarmUp(name);
  for (auto& [key, value] : settings) options.settings[key] = value;
  return options;
}

TEST(PlannedBits, EqualWhatEveryPlanningReducerSends) {
  for (const auto* entry : reducerRegistry().inOrderAdded()) {
    const auto options = optionsOf(entry->name, {});
    const auto planned = plannedBits(entry->name, options, kShapes);
    EXPECT_EQ(planned.has_value(), kUnplanned.count(entry->name) == 0) << entry->name;
    if (!planned) continue;
    // No reducer's message depends on the world size: the all-gathered ones send one payload.
    for (int world : {2, 3}) EXPECT_EQ(2 * *planned, sentBits(entry->name, options, world)) << entry->name << world;
  }
}

// Settings that change the message change the plan the same way.
TEST(PlannedBits, FollowTheReducersSettings) {
  const std::vector<std::pair<std::string, SettingValues>> cases = {
      {"powersgd", {{"rank", int64_t{2}}, {"n_power_iterations", int64_t{1}}, {"min_compression_rate", 1.5}}},
      {"powersgd-ddp", {{"rank", int64_t{2}}, {"min_compression_rate", 0.0}}},
      {"unbiased-rank", {{"rank", int64_t{2}}}},
      {"svd", {{"rank", int64_t{1}}}},
      {"atomo", {{"rank", int64_t{1}}}},
      {"topk", {{"compression", 0.2}}},
      {"global-topk", {{"compression", 0.2}}},
      {"random-k", {{"compression", 0.2}}},
      {"random-block", {{"compression", 0.3}}},
      {"qsgd", {{"quantization_levels", int64_t{3}}}},
      {"two-bit-topk", {{"chunk", int64_t{16}}, {"density", 0.25}}},
      {"dct-topk", {{"block", int64_t{4}}, {"topk", int64_t{3}}}},
      {"fp8", {{"scale", std::string("tensor")}}},
      {"fp4", {{"scale_block", int64_t{16}}}}};
  for (const auto& [name, settings] : cases) {
    const auto options = optionsOf(name, settings);
    const auto planned = plannedBits(name, options, kShapes);
    ASSERT_TRUE(planned.has_value()) << name;
    EXPECT_NE(*planned, *plannedBits(name, optionsOf(name, {}), kShapes)) << name;
    EXPECT_EQ(2 * *planned, sentBits(name, options, 2)) << name;
  }
}

// A plugin reducer whose spec does not say what it sends is not planned, and not offered.
TEST(PlannedBits, UnsizedPluginIsNamedAndRefused) {
  auto spec = reducerRegistry().at("exact").factory;
  spec.planned_bits = nullptr;
  reducerRegistry().add("unsized-plugin", "exact, without its planned bits", spec);
  EXPECT_FALSE(plannedBits("unsized-plugin", optionsOf("unsized-plugin", {}), kShapes).has_value());
  EXPECT_FALSE(plannedBits("no-such-reducer", optionsOf("no-such-reducer", {}), kShapes).has_value());
  const std::string offered = plannableReducers();
  EXPECT_EQ(offered.find("unsized-plugin"), std::string::npos) << offered;
  EXPECT_NE(offered.find("global-topk"), std::string::npos) << offered;
}

}  // namespace
}  // namespace gcrun::reducers
