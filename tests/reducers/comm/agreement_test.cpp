// Ranks that must hold the same named values compare them (comm::disagreement, agreeOn) over real
// Gloo groups: lists of any sizes never reach a collective of mismatched sizes, and a mismatch is
// one line naming the first differing entry on every rank. comm::firstProblem tells every rank the
// lowest failing rank's problem.
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "hyperparams/base/errors.h"
#include "reducers/comm/agreement.h"
#include "tests/support/multi_rank.h"

namespace {

using gcrun::comm::NamedValues;

// Each rank's disagreement() line, given each rank's list.
std::vector<std::string> linesOf(const std::vector<NamedValues>& lists) {
  std::vector<std::string> lines(lists.size());
  gcrun::testing::runRanks(static_cast<int>(lists.size()), [&](gcrun::comm::Communicator& comm) {
    lines[comm.rank()] = gcrun::comm::disagreement(comm, lists[comm.rank()], "the test's settings");
  });
  return lines;
}

const NamedValues kSettings = {{"sync.every", "2"}, {"seed", "1"}, {"task.width", "64"}};

TEST(Agreement, EqualListsAgree) {
  for (const auto& line : linesOf({kSettings, kSettings, kSettings})) EXPECT_EQ(line, "");
  for (const auto& line : linesOf({{}, {}})) EXPECT_EQ(line, "");
}

TEST(Agreement, ADifferentValueIsNamedWithBothValuesOnEveryRank) {
  auto other = kSettings;
  other[1].second = "2";
  for (const auto& line : linesOf({kSettings, other})) {
    EXPECT_EQ(line, "the workers disagree on the test's settings: seed is 1 on rank 0 but 2 on rank 1");
  }
}

TEST(Agreement, TheFirstRankThatDiffersFromRankZeroIsNamed) {
  auto other = kSettings;
  other[2].second = "128";
  for (const auto& line : linesOf({kSettings, kSettings, other})) {
    EXPECT_EQ(line, "the workers disagree on the test's settings: task.width is 64 on rank 0 but 128 on rank 2");
  }
}

TEST(Agreement, AnEntryOneRankLacksIsNamed) {
  auto longer = kSettings;
  longer.emplace_back("reducer.rank", "4");
  for (const auto& line : linesOf({kSettings, longer})) {
    EXPECT_EQ(line,
              "the workers disagree on the test's settings: entry 4 is nothing on rank 0 but reducer.rank = 4 on "
              "rank 1");
  }
  auto renamed = kSettings;
  renamed[0].first = "sync.block";
  for (const auto& line : linesOf({kSettings, renamed})) {
    EXPECT_EQ(line,
              "the workers disagree on the test's settings: entry 1 is sync.every = 2 on rank 0 but "
              "sync.block = 2 on rank 1");
  }
}

// Values of very different sizes (a 4 MiB one against a byte) take fixed-size exchanges: no abort,
// and the line shows a clipped value.
TEST(Agreement, ValuesOfAnySizeAreComparedAndClipped) {
  const NamedValues big = {{"entry", std::string(4 << 20, 'x')}};
  const NamedValues small = {{"entry", "y"}};
  const auto lines = linesOf({small, big});
  ASSERT_EQ(lines[0], lines[1]);
  EXPECT_EQ(lines[0].rfind("the workers disagree on the test's settings: entry is y on rank 0 but xxx", 0), 0u)
      << lines[0];
  EXPECT_LT(lines[0].size(), 400u);
}

TEST(Agreement, AgreeOnThrowsTheLineAsAUserErrorOnEveryRank) {
  std::mutex mutex;
  std::vector<std::string> errors;
  gcrun::testing::runRanks(2, [&](gcrun::comm::Communicator& comm) {
    try {
      gcrun::comm::agreeOn(comm, {{"seed", std::to_string(comm.rank())}}, "the seeds");
    } catch (const gcrun::UserError& e) {
      std::lock_guard<std::mutex> lock(mutex);
      errors.push_back(e.what());
    }
  });
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0], "the workers disagree on the seeds: seed is 0 on rank 0 but 1 on rank 1");
  EXPECT_EQ(errors[1], errors[0]);
}

TEST(Agreement, EveryRankLearnsTheLowestFailingRanksProblem) {
  std::vector<std::optional<gcrun::comm::RankProblem>> seen(3);
  gcrun::testing::runRanks(3, [&](gcrun::comm::Communicator& comm) {
    const std::string problem = comm.rank() == 0 ? "" : "rank-" + std::to_string(comm.rank()) + ".pt is corrupt";
    seen[comm.rank()] = gcrun::comm::firstProblem(comm, problem);
  });
  for (const auto& problem : seen) {
    ASSERT_TRUE(problem.has_value());
    EXPECT_EQ(problem->rank, 1);
    EXPECT_EQ(problem->problem, "rank-1.pt is corrupt");
  }
  gcrun::testing::runRanks(
      2, [&](gcrun::comm::Communicator& comm) { EXPECT_FALSE(gcrun::comm::firstProblem(comm, "").has_value()); });
}

}  // namespace
