#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "reducers/planned_bits.h"
#include "reducers/reducer.h"
#include "tests/support/multi_rank.h"
#include "tests/support/reducer_fixtures.h"

// `gcrun plan`'s message sizes (reducers/planned_bits.h) against the bits reduce() returns over two
// ranks, for every registered reducer that plans. A reducer that cannot plan is named in
// kUnplanned, so that a new reducer is a decision rather than a silent gap.

namespace gcrun::reducers {
namespace {

// A conv kernel, a matrix, a vector, a tall matrix and a 1x1: every path of the low-rank split,
// odd element counts for the packed codes, a tensor of more than one scale block.
const std::vector<std::vector<int64_t>> kShapes = {{6, 3, 2, 2}, {12, 5}, {7}, {300, 2}, {1, 1}};

// Their messages depend on the values (top-k, signs, sampled atoms), on a step counter, or on
// buckets of their own (powersgd-ddp).
const std::set<std::string> kUnplanned = {"powersgd-ddp", "unbiased-rank", "svd",          "atomo",    "signum",
                                          "sign-norm",    "topk",          "global-topk",  "random-k", "random-block",
                                          "qsgd",         "terngrad",      "two-bit-topk", "dct-topk"};

// What one rank's reduce() of random gradients of kShapes returns.
uint64_t sentBits(const std::string& name, const ReducerOptions& options) {
  uint64_t rank0_bits = 0;
  testing::runRanks(2, [&](comm::Communicator& comm) {
    auto reducer = testing::buildReducer(name, comm, options);
    std::vector<at::Tensor> send, out, memory;
    torch::manual_seed(7 + comm.rank());
    for (const auto& shape : kShapes) {
      send.push_back(torch::randn(shape));
      out.push_back(torch::zeros(shape));
      memory.push_back(torch::zeros(shape));
    }
    const uint64_t bits = reducer->reduce(send, out, memory);
    if (comm.rank() == 0) rank0_bits = bits;
  });
  return rank0_bits;
}

TEST(PlannedBits, EqualWhatEveryPlanningReducerSends) {
  for (const auto* entry : reducerRegistry().inOrderAdded()) {
    ReducerOptions options;
    options.name = entry->name;
    const auto planned = plannedBits(entry->name, options, kShapes);
    EXPECT_EQ(planned.has_value(), kUnplanned.count(entry->name) == 0) << entry->name;
    if (planned) EXPECT_EQ(*planned, sentBits(entry->name, options)) << entry->name;
  }
}

// Settings that change the message change the plan the same way.
TEST(PlannedBits, FollowTheReducersSettings) {
  const std::vector<std::pair<std::string, SettingValues>> cases = {
      {"powersgd", {{"rank", int64_t{2}}, {"n_power_iterations", int64_t{1}}, {"min_compression_rate", 1.5}}},
      {"fp8", {{"scale", std::string("tensor")}}},
      {"fp4", {{"scale_block", int64_t{16}}}}};
  for (const auto& [name, settings] : cases) {
    ReducerOptions options;
    options.name = name;
    options.settings = settings;
    const auto planned = plannedBits(name, options, kShapes);
    ASSERT_TRUE(planned.has_value()) << name;
    ReducerOptions defaults;
    defaults.name = name;
    EXPECT_NE(*planned, *plannedBits(name, defaults, kShapes)) << name;
    EXPECT_EQ(*planned, sentBits(name, options)) << name;
  }
}

}  // namespace
}  // namespace gcrun::reducers
