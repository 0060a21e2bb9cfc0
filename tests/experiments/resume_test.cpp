// Bit-exact resume at the level of the parts that carry state between steps: every registered
// reducer (saveState() after some steps, loadState() into a fresh one, the next steps compared
// exactly, on 1 and 2 ranks) and the tasks whose trainLoss() carries dropout generators and an
// LSTM hidden state within an epoch.
#include <gtest/gtest.h>

#include <cctype>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "reducers/granularity.h"
#include "reducers/reducer.h"
#include "tasks/task.h"
#include "tests/support/multi_rank.h"

namespace {

using gcrun::comm::Communicator;
using gcrun::reducers::Reducer;
using gcrun::reducers::ReducerContext;
using gcrun::reducers::reducerRegistry;

constexpr int kStepsBefore = 3;
constexpr int kStepsAfter = 2;

// Every registered reducer at every granularity it accepts of layer and model.
std::vector<std::tuple<std::string, std::string>> reducerCases() {
  std::vector<std::tuple<std::string, std::string>> cases;
  for (const auto* entry : reducerRegistry().entries()) {
    for (const auto granularity : entry->factory.granularities) {
      if (granularity != gcrun::Granularity::bucket) cases.emplace_back(entry->name, gcrun::nameOf(granularity));
    }
  }
  return cases;
}

gcrun::ReducerOptions reducerOptions(const std::string& granularity) {
  gcrun::ReducerOptions options;
  options.settings["rank"] = int64_t{2};
  options.settings["compression"] = 0.2;
  options.settings["quantization_levels"] = int64_t{16};
  // powersgd and powersgd-ddp compress from the third step, every tensor: state to carry.
  options.settings["start_iter"] = int64_t{2};
  options.settings["min_compression_rate"] = 0.5;
  options.granularity = gcrun::enumFromName<gcrun::Granularity>(granularity);
  return options;
}

std::unique_ptr<Reducer> makeReducer(const std::string& name, const gcrun::ReducerOptions& options,
                                     Communicator& comm) {
  return gcrun::reducers::withGranularity(
      reducerRegistry().at(name).factory.make(ReducerContext{comm, options, /*seed=*/11, /*parameters=*/{}}), options);
}

// This rank's gradients of one step: a matrix, a bias, a conv kernel and a second matrix, drawn
// from a generator of (rank, step) so that ranks differ.
std::vector<at::Tensor> gradients(int rank, int step) {
  at::Generator generator = at::detail::createCPUGenerator(1000 + 100 * rank + step);
  std::vector<at::Tensor> out;
  for (const auto& shape : std::vector<std::vector<int64_t>>{{6, 5}, {5}, {4, 3, 2, 2}, {3, 4}}) {
    out.push_back(at::randn(shape, generator));
  }
  return out;
}

struct StepResult {
  std::vector<at::Tensor> out, memory;
  uint64_t bits = 0;
};

StepResult step(Reducer& reducer, const std::vector<at::Tensor>& grads) {
  StepResult result;
  std::vector<at::Tensor> send;
  for (const auto& g : grads) {
    send.push_back(g.clone());
    result.out.push_back(at::full_like(g, 7.0));
    result.memory.push_back(at::full_like(g, 7.0));
  }
  result.bits = reducer.reduce(send, result.out, result.memory);
  return result;
}

void expectIdentical(const StepResult& a, const StepResult& b, const std::string& what) {
  EXPECT_EQ(a.bits, b.bits) << what;
  for (size_t i = 0; i < a.out.size(); ++i) {
    EXPECT_TRUE(at::equal(a.out[i], b.out[i])) << what << ": output " << i;
    EXPECT_TRUE(at::equal(a.memory[i], b.memory[i])) << what << ": memory " << i;
  }
}

// What a checkpoint file gives back: copies, not the reducer's own tensors.
Reducer::State copied(const Reducer::State& state) {
  Reducer::State out;
  for (const auto& kv : state) out[kv.first] = kv.second.clone();
  return out;
}

class ReducerResume : public ::testing::TestWithParam<std::tuple<std::tuple<std::string, std::string>, int>> {};

TEST_P(ReducerResume, NextStepsMatchTheUninterruptedRun) {
  const auto& [name, granularity] = std::get<0>(GetParam());
  const int world_size = std::get<1>(GetParam());
  const auto options = reducerOptions(granularity);
  gcrun::testing::runRanks(world_size, [&](Communicator& comm) {
    auto original = makeReducer(name, options, comm);
    for (int s = 0; s < kStepsBefore; ++s) step(*original, gradients(comm.rank(), s));
    Reducer::State saved;
    original->saveState(saved);

    auto resumed = makeReducer(name, options, comm);
    resumed->loadState(copied(saved));
    // Saved again before its next step (a resume checks its state, a stop can checkpoint at once),
    // it gives back what it loaded: powersgd-ddp's lazily restored tensors failed here.
    Reducer::State again;
    resumed->saveState(again);
    ASSERT_EQ(again.size(), saved.size()) << name;
    for (const auto& [entry, tensor] : saved) {
      ASSERT_TRUE(again.count(entry)) << name << ": " << entry;
      EXPECT_TRUE(at::equal(again.at(entry), tensor)) << name << ": " << entry;
    }
    // An empty state claims the reducer has none: a fresh one must then continue identically too.
    for (int s = kStepsBefore; s < kStepsBefore + kStepsAfter; ++s) {
      const auto grads = gradients(comm.rank(), s);
      const StepResult expected = step(*original, grads);
      expectIdentical(expected, step(*resumed, grads), name + " step " + std::to_string(s + 1));
    }

    if (saved.empty()) return;
    // A reducer that reports state must need it: a fresh one does not continue the run.
    const auto grads = gradients(comm.rank(), kStepsBefore);
    const StepResult restarted = step(*makeReducer(name, options, comm), grads);
    auto replay = makeReducer(name, options, comm);
    replay->loadState(copied(saved));
    const StepResult loaded = step(*replay, grads);
    bool differs = false;
    for (size_t i = 0; i < loaded.out.size(); ++i) differs |= !at::equal(loaded.out[i], restarted.out[i]);
    EXPECT_TRUE(differs) << name << ": its saved state changes nothing";

    auto incomplete = makeReducer(name, options, comm);
    try {
      incomplete->loadState({});
      ADD_FAILURE() << name << ": loadState of an empty state did not throw";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("' is missing"), std::string::npos) << e.what();
    }
  });
}

INSTANTIATE_TEST_SUITE_P(AllReducers, ReducerResume,
                         ::testing::Combine(::testing::ValuesIn(reducerCases()), ::testing::Values(1, 2)),
                         [](const auto& info) {
                           std::string name = std::get<0>(std::get<0>(info.param)) + "_" +
                                              std::get<1>(std::get<0>(info.param)) + "_w" +
                                              std::to_string(std::get<1>(info.param));
                           for (auto& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

using gcrun::tasks::Shard;
using gcrun::tasks::Task;

std::unique_ptr<Task> makeTask(const gcrun::TaskOptions& options, int64_t batch_size) {
  return gcrun::tasks::taskRegistry()
      .at(options.name)
      .factory.make(gcrun::tasks::TaskContext{options, batch_size, /*seed=*/5, c10::Device("cpu")});
}

// The trainer's protocol: the resumed task sets up the saved epoch, skips the trained batches,
// then loads the state; its next losses are the uninterrupted task's, bit for bit. A task that
// skips the load draws other masks (or starts from another hidden state), so the check has teeth.
void expectTaskResumesExactly(const gcrun::TaskOptions& options, int64_t batch_size) {
  const Shard shard{1, 2};
  const int64_t epoch = 1;
  constexpr int kTrained = 2;
  torch::NoGradGuard no_grad;

  auto original = makeTask(options, batch_size);
  auto batches = original->trainBatches(shard, epoch);
  gcrun::tasks::MetricSums sums;
  for (int b = 0; b < kTrained; ++b) original->trainLoss(*batches->next(), sums);
  Task::State saved;
  original->saveState(saved);
  ASSERT_FALSE(saved.empty());
  std::vector<double> expected;
  for (int b = 0; b < 2; ++b) expected.push_back(original->trainLoss(*batches->next(), sums).item<double>());

  for (const bool load : {true, false}) {
    auto resumed = makeTask(options, batch_size);
    auto replay = resumed->trainBatches(shard, epoch);
    for (int b = 0; b < kTrained; ++b) replay->next();
    if (load) {
      Task::State copy;
      for (const auto& kv : saved) copy[kv.first] = kv.second.clone();
      resumed->loadState(copy);
    }
    const double first = resumed->trainLoss(*replay->next(), sums).item<double>();
    const double second = resumed->trainLoss(*replay->next(), sums).item<double>();
    if (load) {
      EXPECT_EQ(first, expected[0]);
      EXPECT_EQ(second, expected[1]);
    } else {
      EXPECT_NE(first, expected[0]);
    }
  }
}

TEST(TaskResume, WikiText2DropoutAndHiddenStateContinueMidEpoch) {
  gcrun::TaskOptions options;
  options.name = "wikitext2";
  options.architecture = "lstm";
  options.synthetic = true;
  options.synthetic_samples = 2000;
  expectTaskResumesExactly(options, 2);
}

TEST(TaskResume, Cifar10VggDropoutContinuesMidEpoch) {
  gcrun::TaskOptions options;
  options.name = "cifar10";
  options.architecture = "vgg16";
  options.synthetic = true;
  options.synthetic_samples = 64;
  expectTaskResumesExactly(options, 2);
}

TEST(TaskResume, WikiText2RefusesAStateWithoutItsHiddenState) {
  gcrun::TaskOptions options;
  options.name = "wikitext2";
  options.architecture = "lstm";
  options.synthetic = true;
  options.synthetic_samples = 2000;
  auto task = makeTask(options, 2);
  task->trainBatches(Shard{0, 1}, 0);
  Task::State state;
  task->saveState(state);
  state.erase("hidden/c");
  try {
    task->loadState(state);
    ADD_FAILURE() << "loadState without hidden/c did not throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'hidden/c' is missing"), std::string::npos) << e.what();
  }
}

}  // namespace
