#include <gtest/gtest.h>

#include <cctype>
#include <memory>
#include <string>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "experiments/sync/replicas.h"
#include "experiments/sync/synchronizer.h"
#include "tests/support/multi_rank.h"
#include "tests/support/reducer_fixtures.h"

// Invariants every registered sync strategy keeps, checked over a real 2-rank Gloo group with a
// lossless and a compressing reducer, with sync.every 2 (and local-sgd's warm-up of 5 steps, so
// that its reducer runs after the restore, which some reducers apply lazily) for the strategies
// that read them, so that the run's last step is a sync: the workers' models agree
// after it, and during an evaluation between syncs every worker evaluates the same model and gets
// its own back after; a checkpoint's state restored into a fresh synchronizer continues bit for
// bit as the saved one would have (its parameters and its own state alike); and the bits a
// strategy reports are those its reducer sent plus those it sent itself outside the reducer.

namespace gcrun::experiments {
namespace {

constexpr int kSteps = 8;

// Counts the bits of every reduce() it passes on to `inner`.
class CountingReducer : public reducers::Reducer {
 public:
  explicit CountingReducer(std::unique_ptr<reducers::Reducer> inner) : inner_(std::move(inner)) {}
  uint64_t reduce(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& out,
                  const std::vector<at::Tensor>& memory) override {
    const uint64_t bits = inner_->reduce(send, out, memory);
    sent += bits;
    return bits;
  }
  void ready(size_t index, const std::vector<at::Tensor>& send) override { inner_->ready(index, send); }
  void saveState(State& state) const override { inner_->saveState(state); }
  void loadState(const State& state) override { inner_->loadState(state); }
  std::vector<TensorCost> lastCosts() const override { return inner_->lastCosts(); }
  uint64_t sent = 0;

 private:
  std::unique_ptr<reducers::Reducer> inner_;
};

// Counts the bits of the collectives a strategy runs itself, outside its reducer.
class CountingCommunicator : public comm::Communicator {
 public:
  explicit CountingCommunicator(comm::Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string backend() const override { return inner_.backend(); }
  void allreduceSum(at::Tensor& tensor) override {
    sent += reducers::bitsOf(tensor);
    inner_.allreduceSum(tensor);
  }
  std::unique_ptr<comm::PendingCollective> allreduceSumAsync(at::Tensor& tensor) override {
    sent += reducers::bitsOf(tensor);
    return inner_.allreduceSumAsync(tensor);
  }
  std::vector<at::Tensor> allgather(const at::Tensor& tensor) override {
    sent += reducers::bitsOf(tensor);
    return inner_.allgather(tensor);
  }
  void broadcast(at::Tensor& tensor, int root) override { inner_.broadcast(tensor, root); }
  void barrier() override { inner_.barrier(); }
  uint64_t sent = 0;

 private:
  comm::Communicator& inner_;
};

// The test's settings of the strategies that declare them: a sync every 2 steps, 5 warm-up steps,
// no drift measured (its collectives are not counted as sent), compressors that drop something,
// and streaming-diloco's whole model synced at once and applied unmixed at its send, so that the
// last step syncs every parameter (its fragments, delay and mixing: streaming_diloco_test.cpp).
SettingValues testSettings(const std::string& strategy) {
  SettingValues values;
  for (const auto& spec : synchronizerRegistry().at(strategy).factory.settings) {
    if (spec.name == "every") values["every"] = int64_t{2};
    if (spec.name == "warmup_steps") values["warmup_steps"] = int64_t{5};
    if (spec.name == "drift") values["drift"] = false;
    if (spec.name == "fragments") values["fragments"] = int64_t{1};
    if (spec.name == "delay") values["delay"] = int64_t{0};
    if (spec.name == "mix_alpha") values["mix_alpha"] = 0.0;
  }
  return values;
}

// The codec reducers keep a part of these small tensors (two-bit-topk's chunks, dct-topk's blocks).
ReducerOptions testReducer(const std::string& name) {
  ReducerOptions options;
  options.name = name;
  if (name == "two-bit-topk") options.settings = {{"chunk", int64_t{8}}, {"density", 0.25}};
  if (name == "dct-topk") options.settings = {{"block", int64_t{2}}, {"topk", int64_t{2}}};
  return options;
}

// One worker of the test: a 6x4 weight and a bias, the same on every rank at the start, trained
// by plain SGD on data of its own rank, through `strategy` and `reducer`.
struct Worker {
  Worker(comm::Communicator& comm, const std::string& strategy, const std::string& reducer_name)
      : params{torch::linspace(-1, 1, 24).reshape({6, 4}).clone().requires_grad_(), torch::zeros({4}).requires_grad_()},
        buffers(params),
        reducer(testing::buildReducer(reducer_name, comm, testReducer(reducer_name))),
        counting(comm) {
    config.sync.strategy = strategy;
    config.sync.settings = testSettings(strategy);
    config.reducer = testReducer(reducer_name);
    const bool lossless = reducers::reducerRegistry().at(reducer_name).factory.lossless;
    sync = synchronizerRegistry().at(strategy).factory.make(SyncContext{config, counting, reducer, lossless, 0.0,
                                                                        params, names, buffers, [](size_t) {},
                                                                        testing::reducerMaker(counting, config)});
  }

  // Step `step` (1-based) on data drawn from (rank, step): the bits the synchronizer reports.
  uint64_t step(int64_t step, int rank) {
    // A generator of its own: the ranks are threads, and the global one would be shared by them.
    auto generator = at::detail::createCPUGenerator(1000 * rank + step);
    const auto x = torch::randn({8, 6}, generator);
    sync->beforeBackward(true);
    torch::mm(x, params[0]).add(params[1]).pow(2).mean().backward();
    torch::NoGradGuard no_grad;
    const uint64_t bits = sync->afterBackward();
    for (size_t i = 0; i < params.size(); ++i) params[i].sub_(buffers.gradients[i], 0.1);
    const uint64_t synced = sync->afterStep(step);
    const auto event = sync->lastSync();
    if (event) {
      EXPECT_EQ(event->bits, bits + synced) << "a sync's event carries the bits of its step";
      ++syncs;
    }
    return bits + synced;
  }

  ExperimentConfig config;
  std::vector<at::Tensor> params;
  std::vector<std::string> names{"weight", "bias"};
  GradientBuffers buffers;
  CountingReducer reducer;
  CountingCommunicator counting;
  std::unique_ptr<Synchronizer> sync;
  int syncs = 0;  // the steps whose lastSync() said they synced models
};

// The parameters of every rank, each rank's concatenated.
std::vector<at::Tensor> gathered(comm::Communicator& comm, const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> flat;
  for (const auto& p : params) flat.push_back(p.detach().flatten());
  return comm.allgather(torch::cat(flat));
}

void expectSameState(const TensorMap& a, const TensorMap& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, tensor] : a) {
    ASSERT_EQ(b.count(name), 1u) << name;
    EXPECT_TRUE(torch::equal(tensor, b.at(name))) << name;
  }
}

// Between syncs: every worker evaluates the same model, and has its own back after.
void expectOneModelEvaluated(comm::Communicator& comm, Worker& worker) {
  std::vector<at::Tensor> own;
  for (const auto& p : worker.params) own.push_back(p.detach().clone());
  const uint64_t sent = worker.counting.sent;
  worker.sync->beforeEvaluation();
  const auto evaluated = gathered(comm, worker.params);
  EXPECT_TRUE(torch::equal(evaluated[0], evaluated[1])) << "the workers evaluate different models";
  worker.sync->afterEvaluation();
  for (size_t i = 0; i < own.size(); ++i) EXPECT_TRUE(torch::equal(own[i], worker.params[i])) << worker.names[i];
  worker.counting.sent = sent;  // an evaluation's collectives are no part of training's bits
}

class EveryStrategy : public ::testing::TestWithParam<std::string> {};

// Whether `strategy` accepts the test's configuration with `reducer`.
bool accepts(const std::string& strategy, const std::string& reducer) {
  const auto& validate = synchronizerRegistry().at(strategy).factory.validate;
  if (!validate) return true;
  ExperimentConfig config;
  config.sync.strategy = strategy;
  config.reducer.name = reducer;
  config.optimizer.momentum = 0;  // the test's plain SGD
  config.optimizer.momentum_type = MomentumType::heavy_ball;
  try {
    validate(config);
    return true;
  } catch (const UserError&) {
    return false;
  }
}

TEST_P(EveryStrategy, KeepsItsInvariantsOverTwoRanks) {
  for (const auto* entry : synchronizerRegistry().entries()) {
    if (!accepts(entry->name, GetParam())) continue;
    SCOPED_TRACE(entry->name + " with " + GetParam());
    testing::runRanks(2, [&](comm::Communicator& comm) {
      Worker saved(comm, entry->name, GetParam());
      uint64_t bits = 0;
      for (int64_t s = 1; s <= kSteps / 2; ++s) bits += saved.step(s, comm.rank());
      TensorMap state;
      saved.sync->saveState(state);
      EXPECT_FALSE(saved.sync->layerSample().gradient.empty());

      Worker restored(comm, entry->name, GetParam());
      {
        torch::NoGradGuard no_grad;
        for (size_t i = 0; i < restored.params.size(); ++i) restored.params[i].copy_(saved.params[i]);
      }
      state["counter/step"] = torch::scalar_tensor(int64_t{kSteps / 2}, torch::kInt64);  // bounds its counts
      restored.sync->loadState(state);

      for (int64_t s = kSteps / 2 + 1; s <= kSteps; ++s) {
        bits += saved.step(s, comm.rank());
        restored.step(s, comm.rank());
        if (s == kSteps - 1) expectOneModelEvaluated(comm, saved);
      }
      for (size_t i = 0; i < saved.params.size(); ++i) {
        EXPECT_TRUE(torch::equal(saved.params[i], restored.params[i])) << "a restored run differs: " << saved.names[i];
      }
      TensorMap saved_end, restored_end;  // a reducer may apply restored state at its next step only
      saved.sync->saveState(saved_end);
      restored.sync->saveState(restored_end);
      expectSameState(saved_end, restored_end);
      EXPECT_EQ(bits, saved.reducer.sent + saved.counting.sent) << "the bits reported are all that was sent";
      EXPECT_GT(bits, 0u);
      if (entry->factory.local_replicas) {
        EXPECT_GT(saved.syncs, 0) << "a strategy that syncs models reports its syncs";
      }
      const auto all = gathered(comm, saved.params);
      EXPECT_TRUE(torch::equal(all[0], all[1])) << "the workers' models differ after the last sync";
    });
  }
}

// Every count a strategy saves (local-sgd's steps, the outer SGD's steps, sparseloco's syncs, a
// fragment's step of application) is bounded by the checkpoint's step: the old code took a crafted
// 2^62 or -5 as it was.
TEST_P(EveryStrategy, RefusesCountsNoRunCouldHaveSaved) {
  size_t counts = 0;
  for (const auto* entry : synchronizerRegistry().entries()) {
    if (!accepts(entry->name, GetParam())) continue;
    SCOPED_TRACE(entry->name + " with " + GetParam());
    testing::runRanks(1, [&](comm::Communicator& comm) {
      Worker saved(comm, entry->name, GetParam());
      for (int64_t s = 1; s <= kSteps / 2; ++s) saved.step(s, comm.rank());
      TensorMap state;
      saved.sync->saveState(state);
      state["counter/step"] = torch::scalar_tensor(int64_t{kSteps / 2}, torch::kInt64);
      for (const auto& [name, tensor] : state) {
        if (tensor.dim() != 0 || tensor.scalar_type() != torch::kInt64 || saved.sync->checksEntry(name) ||
            name == "counter/step") {
          continue;
        }
        ++counts;
        for (const int64_t crafted : {int64_t{1} << 62, int64_t{-5}}) {
          TensorMap tampered = state;
          tampered[name] = torch::scalar_tensor(crafted, torch::kInt64);
          Worker restored(comm, entry->name, GetParam());
          try {
            restored.sync->loadState(tampered);
            ADD_FAILURE() << name << " = " << crafted << " was taken";
          } catch (const UserError& e) {
            EXPECT_NE(std::string(e.what()).find("'" + name + "' is " + std::to_string(crafted)), std::string::npos)
                << e.what();
          }
        }
      }
    });
  }
  EXPECT_GE(counts, 4u) << "local-sgd's steps, the outer steps, a fragment's step of application";
}

INSTANTIATE_TEST_SUITE_P(Reducers, EveryStrategy,
                         ::testing::Values("exact", "powersgd", "two-bit-topk", "dct-topk", "fp8", "fp4", "int8"),
                         [](const auto& info) {
                           auto name = info.param;
                           for (auto& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

// Two replicas (1, 0) and (3, 0): their mean (2, 0) is 1 from each, so the drift is 1 / 2.
TEST(ReplicaDrift, IsTheReplicasRmsDistanceFromTheirMeanOverTheMeansNorm) {
  testing::runRanks(2, [](comm::Communicator& comm) {
    const std::vector<at::Tensor> params{torch::tensor({comm.rank() == 0 ? 1.0f : 3.0f}), torch::zeros({1})};
    EXPECT_DOUBLE_EQ(replicaDrift(comm, params), 0.5);
    EXPECT_EQ(params[0].item<float>(), comm.rank() == 0 ? 1.0f : 3.0f) << "measuring leaves the replicas as they were";
  });
}

TEST(SynchronizerRegistry, EveryStepIsTheDefaultAndAnUnknownNameListsTheKnownOnes) {
  EXPECT_TRUE(synchronizerRegistry().contains(ExperimentConfig{}.sync.strategy));
  EXPECT_EQ(ExperimentConfig{}.sync.strategy, "every-step");
  try {
    synchronizerRegistry().at("no-such-strategy");
    ADD_FAILURE() << "an unknown strategy must be refused";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("every-step"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gcrun::experiments
