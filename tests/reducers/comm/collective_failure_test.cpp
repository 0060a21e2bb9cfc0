// A collective whose peer stops taking part fails as a CollectiveFailed naming its rank and the
// group's timeout, with Gloo's own line kept after gcrun's: over a real two-rank Gloo group with a
// one-second timeout, rank 1 never joins rank 0's all-reduce, then rank 1 leaves outright.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "reducers/comm/collective_failure.h"
#include "reducers/comm/process_group.h"

namespace {

using gcrun::comm::CollectiveFailed;
using std::chrono::milliseconds;

constexpr milliseconds kTimeout(1000);

// Rank 0 all-reduces once; rank 1 runs `peer` (given its communicator) instead. Returns what
// rank 0's all-reduce threw, if it threw a CollectiveFailed.
using Peer = std::function<void(std::unique_ptr<gcrun::comm::Communicator>&)>;

std::optional<CollectiveFailed> rankZeroFailure(const Peer& peer) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::promise<void> done;
  auto finished = done.get_future().share();
  std::thread other([&] {
    auto comm = gcrun::comm::glooOverStore(store, 1, 2, kTimeout);
    peer(comm);
    finished.wait();
  });
  auto comm = gcrun::comm::glooOverStore(store, 0, 2, kTimeout);
  std::optional<CollectiveFailed> failure;
  try {
    auto tensor = at::ones({4});
    comm->allreduceSum(tensor);
  } catch (const CollectiveFailed& e) {
    failure = e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a CollectiveFailed: " << e.what();
  }
  done.set_value();
  other.join();
  return failure;
}

TEST(CollectiveFailure, APeerThatNeverComesTimesOutNamingTheRankAndTheTimeout) {
  const auto started = std::chrono::steady_clock::now();
  const auto failure = rankZeroFailure([](std::unique_ptr<gcrun::comm::Communicator>&) {});
  ASSERT_TRUE(failure);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
  EXPECT_TRUE(failure->timedOut());
  EXPECT_EQ(failure->rank(), 0);
  EXPECT_EQ(failure->timeout(), kTimeout);
  const std::string what = failure->what();
  EXPECT_EQ(what.rfind("a collective on rank 0 timed out after 1 s (", 0), 0u) << what;
  EXPECT_NE(what.find(failure->backendLine()), std::string::npos) << what;
  EXPECT_FALSE(failure->backendLine().empty());
}

TEST(CollectiveFailure, APeerThatLeavesFailsTheCollectiveBeforeTheTimeout) {
  const auto started = std::chrono::steady_clock::now();
  // Rank 1 leaves: its group (and its sockets) go while rank 0 waits for it.
  const auto failure = rankZeroFailure([](std::unique_ptr<gcrun::comm::Communicator>& comm) { comm.reset(); });
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->rank(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - started, kTimeout * 9 / 10);
  EXPECT_FALSE(failure->timedOut());
  EXPECT_EQ(std::string(failure->what()).rfind("a collective on rank 0 failed before its timeout of 1 s", 0), 0u)
      << failure->what();
}

TEST(CollectiveFailure, OnlyAWaitThatRanOutOfTheTimeoutCountsAsTimedOut) {
  using gcrun::comm::ranOutOf;
  EXPECT_TRUE(ranOutOf(milliseconds(1000), kTimeout, "Connection closed by peer"));
  EXPECT_TRUE(ranOutOf(milliseconds(10), kTimeout, "Timed out waiting 1000ms for recv operation to complete"));
  EXPECT_FALSE(ranOutOf(milliseconds(10), kTimeout, "[pair.cc:598] Connection closed by peer"));
  EXPECT_EQ(gcrun::comm::secondsText(milliseconds(60000)), "60 s");
  EXPECT_EQ(gcrun::comm::secondsText(milliseconds(1500)), "1.5 s");
}

}  // namespace
