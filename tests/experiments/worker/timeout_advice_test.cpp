// A run whose collective timed out says which setting to raise, its value, and what the peers were
// doing: over a real two-rank Gloo group with a one-second timeout, rank 1 holds the simulated
// workers' turn (computing) while rank 0's all-reduce waits for it, as 8 simulated LSTM workers'
// turns outlast a short distributed.timeout_s.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <optional>
#include <regex>
#include <string>
#include <thread>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "experiments/training/worker_role.h"
#include "experiments/worker/timeout_advice.h"
#include "reducers/comm/process_group.h"

namespace {

using gcrun::comm::CollectiveFailed;
using gcrun::experiments::collectiveFailureText;
using gcrun::experiments::SimulatedTurns;

constexpr std::chrono::milliseconds kTimeout(1000);

TEST(TimeoutAdvice, ACollectiveWaitingForASimulatedWorkersTurnNamesTheSettingAndTheTurns) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  gcrun::experiments::TurnLock device;
  std::promise<void> turn_taken, done;
  auto finished = done.get_future().share();
  std::thread computing([&] {
    auto comm = gcrun::comm::glooOverStore(store, 1, 2, kTimeout);
    gcrun::experiments::Turn turn(device);
    turn_taken.set_value();
    finished.wait();  // its compute outlasts rank 0's timeout
  });
  auto comm = gcrun::comm::glooOverStore(store, 0, 2, kTimeout);
  turn_taken.get_future().wait();
  std::optional<std::string> line;
  try {
    auto tensor = at::ones({4});
    comm->allreduceSum(tensor);
  } catch (const CollectiveFailed& e) {
    line = collectiveFailureText(e, 1, SimulatedTurns{2, device.longestTurnS()});
  }
  done.set_value();
  computing.join();
  ASSERT_TRUE(line);
  // The turn under way is at least the timeout long; on a loaded machine, a little longer.
  EXPECT_TRUE(std::regex_match(*line, std::regex("a collective on rank 0 timed out after 1 s \\(distributed.timeout_s: "
                                                 "1\\); the simulated workers compute in turn, 2 of them at ~[12]s a "
                                                 "turn need about [2-4]s: raise distributed.timeout_s \\(.+\\)")))
      << *line;
}

TEST(TimeoutAdvice, WithoutSimulatedWorkersItSaysAPeerDidNotCome) {
  const CollectiveFailed failure(3, std::chrono::seconds(60), true, "[gloo] Timed out waiting 60000ms");
  EXPECT_EQ(collectiveFailureText(failure, 60, std::nullopt),
            "a collective on rank 3 timed out after 60 s (distributed.timeout_s: 60); a peer did not reach the same "
            "collective in that time: raise distributed.timeout_s ([gloo] Timed out waiting 60000ms)");
  EXPECT_EQ(collectiveFailureText(failure, 60, SimulatedTurns{8, 40}),
            "a collective on rank 3 timed out after 60 s (distributed.timeout_s: 60); the simulated workers compute in "
            "turn, 8 of them at ~40s a turn need about 5m20s: raise distributed.timeout_s ([gloo] Timed out waiting "
            "60000ms)");
}

TEST(TimeoutAdvice, ALostPeerKeepsItsOwnLine) {
  const CollectiveFailed failure(1, std::chrono::seconds(60), false, "[pair.cc:598] Connection closed by peer");
  EXPECT_EQ(collectiveFailureText(failure, 60, SimulatedTurns{8, 40}), failure.what());
}

TEST(TurnLock, TheLongestTurnCountsTheOneUnderWay) {
  gcrun::experiments::TurnLock device;
  EXPECT_EQ(device.longestTurnS(), 0);
  {
    gcrun::experiments::Turn turn(device);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_GE(device.longestTurnS(), 0.05);
  }
  const double longest = device.longestTurnS();
  EXPECT_GE(longest, 0.05);
  { gcrun::experiments::Turn short_turn(device); }
  EXPECT_EQ(device.longestTurnS(), longest);
}

}  // namespace
