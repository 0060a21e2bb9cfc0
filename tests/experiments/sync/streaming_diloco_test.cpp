#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "experiments/setup/resolved_experiment.h"
#include "experiments/sync/streaming_diloco.h"
#include "experiments/trace/traced_communicator.h"
#include "experiments/worker/runner.h"
#include "hyperparams/base/errors.h"
#include "outputs/trace/recorder.h"
#include "tests/support/multi_rank.h"
#include "tests/support/reducer_fixtures.h"
#include "tests/support/temp_dir.h"

// streaming-diloco over real 2-rank Gloo groups: diloco when it has one fragment, no delay and no
// mixing; its schedule and fragments; one delayed, mixed application against its closed form in
// float64; a resume with a fragment in flight; and the settings it refuses.

namespace gcrun::experiments {
namespace {

struct Streaming {
  int64_t every = 4;
  int64_t fragments = 2;
  int64_t delay = 1;
  double mix_alpha = 0.5;
};

SettingValues settingsOf(const Streaming& s) {
  return {
      {"every", s.every}, {"fragments", s.fragments}, {"delay", s.delay}, {"mix_alpha", s.mix_alpha}, {"drift", false}};
}

// A worker of `strategy` with `params` (named `names`), whose context reducer is built as
// streaming-diloco builds its fragments' (so diloco's matches a single fragment's).
struct Worker {
  // `background`: the context offers reducers over a second group, so that streaming-diloco's
  // exchanges may run in the background (on `comm.sibling()`), as a worker's context does.
  Worker(comm::Communicator& comm, const std::string& strategy, const SettingValues& settings,
         const std::string& reducer_name, std::vector<at::Tensor> initial, std::vector<std::string> parameter_names,
         bool background = false)
      : params(std::move(initial)), names(std::move(parameter_names)), buffers(params) {
    config.sync.strategy = strategy;
    config.sync.settings = settings;
    config.reducer.name = reducer_name;
    std::vector<reducers::ParameterInfo> infos;
    for (size_t i = 0; i < params.size(); ++i) infos.push_back({names[i], params[i].sizes().vec()});
    const auto make_reducer = testing::reducerMaker(comm, config);
    reducer = make_reducer(infos);
    const bool lossless = reducers::reducerRegistry().at(reducer_name).factory.lossless;
    ReducerOverMaker make_reducer_over;
    if (background) {
      make_reducer_over = [this](comm::Communicator& other, std::vector<reducers::ParameterInfo> parameters) {
        return testing::reducerMaker(other, config)(std::move(parameters));
      };
    }
    sync = synchronizerRegistry().at(strategy).factory.make(SyncContext{
        config, comm, *reducer, lossless, 0.0, params, names, buffers, [](size_t) {}, make_reducer, make_reducer_over});
  }

  ExperimentConfig config;
  std::vector<at::Tensor> params;
  std::vector<std::string> names;
  GradientBuffers buffers;
  std::unique_ptr<reducers::Reducer> reducer;
  std::unique_ptr<Synchronizer> sync;
};

// Three modules: in (weight, bias), hidden (weight, bias), out (weight).
std::vector<at::Tensor> threeModules() {
  return {torch::linspace(-1, 1, 24).reshape({6, 4}).clone().requires_grad_(), torch::zeros({4}).requires_grad_(),
          torch::linspace(-0.5, 0.5, 12).reshape({4, 3}).clone().requires_grad_(), torch::zeros({3}).requires_grad_(),
          torch::linspace(0.2, -0.3, 3).reshape({3, 1}).clone().requires_grad_()};
}
const std::vector<std::string> kThreeModuleNames{"in.weight", "in.bias", "hidden.weight", "hidden.bias", "out.weight"};

Worker threeModuleWorker(comm::Communicator& comm, const std::string& strategy, const SettingValues& settings,
                         const std::string& reducer, bool background = false) {
  return Worker(comm, strategy, settings, reducer, threeModules(), kThreeModuleNames, background);
}

// Step `step` (1-based) of SGD on data drawn from (rank, step); whether the step synced.
bool trainStep(Worker& w, int64_t step, int rank) {
  auto generator = at::detail::createCPUGenerator(1000 * rank + step);
  const auto x = torch::randn({8, 6}, generator);
  w.sync->beforeBackward(false);
  const auto& p = w.params;
  const auto hidden = torch::tanh(torch::mm(torch::tanh(torch::mm(x, p[0]).add(p[1])), p[2]).add(p[3]));
  torch::mm(hidden, p[4]).pow(2).mean().backward();
  torch::NoGradGuard no_grad;
  w.sync->afterBackward();
  for (size_t i = 0; i < p.size(); ++i) p[i].sub_(w.buffers.gradients[i], 0.1);
  w.sync->afterStep(step);
  return w.sync->lastSync().has_value();
}

class StreamingDilocoWithReducer : public ::testing::TestWithParam<std::string> {};

// Syncs after steps 2, 4 and 6: an outer step from a first momentum, then two with it.
TEST_P(StreamingDilocoWithReducer, OneFragmentWithoutDelayOrMixingIsDiloco) {
  testing::runRanks(2, [&](comm::Communicator& comm) {
    auto diloco = threeModuleWorker(comm, "diloco", {{"every", int64_t{2}}, {"drift", false}}, GetParam());
    auto streaming = threeModuleWorker(comm, "streaming-diloco", settingsOf({2, 1, 0, 0.0}), GetParam());
    for (int64_t step = 1; step <= 6; ++step) {
      EXPECT_EQ(trainStep(diloco, step, comm.rank()), trainStep(streaming, step, comm.rank())) << "step " << step;
    }
    const auto start = threeModules();
    for (size_t i = 0; i < start.size(); ++i) {
      EXPECT_TRUE(torch::equal(diloco.params[i], streaming.params[i])) << kThreeModuleNames[i];
      EXPECT_FALSE(torch::equal(diloco.params[i], start[i])) << kThreeModuleNames[i] << " never moved";
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Reducers, StreamingDilocoWithReducer, ::testing::Values("exact", "powersgd"));

// metrics.jsonl of a run, one line per event, without the events that time it.
std::vector<std::string> untimedEvents(const std::string& run_dir) {
  std::ifstream file(run_dir + "/metrics.jsonl");
  std::vector<std::string> events;
  for (std::string line; std::getline(file, line);) {
    if (line.find("\"time_per_batch\"") == std::string::npos && line.find("\"elapsed_s\"") == std::string::npos) {
      events.push_back(line);
    }
  }
  return events;
}

// Whole runs of 2 workers through the trainer (synthetic Fashion-MNIST, PowerSGD, a sync every 2
// of 8 steps, drift measured, two evaluations of θ_g and of rank 0's replica): streaming-diloco at
// F = 1, τ = 0, α = 0 logs every loss, sync, drift and evaluated metric of diloco, bit for bit.
TEST(StreamingDiloco, OneFragmentRunIsADilocoRunEventForEvent) {
  const auto run = [](const std::string& dir, const std::vector<std::string>& sync) {
    std::vector<std::string> assignments = {
        "task.synthetic=true",  "task.synthetic_samples=512", "training.batch_size=32", "training.epochs=2",
        "output.sinks=[jsonl]", "output.log_every_steps=1",   "sync.every=2",           "evaluation.max_samples=64"};
    assignments.insert(assignments.end(), sync.begin(), sync.end());
    const ResolvedExperiment experiment = resolve(layeredConfig("fashion-sgd", "", assignments));
    RunOptions options;
    options.output_dir = dir;
    testing::runRanks(2, [&](comm::Communicator& comm) { runWorker(experiment, options, comm); });
    return untimedEvents(dir);
  };
  testing::TempDir dir;
  const auto diloco = run(dir.file("diloco"), {"sync.strategy=diloco"});
  const auto streaming = run(dir.file("streaming"), {"sync.strategy=streaming-diloco", "sync.fragments=1",
                                                     "sync.delay=0", "sync.mix_alpha=0"});
  EXPECT_GT(diloco.size(), 30u);
  EXPECT_EQ(diloco, streaming);
  std::ostringstream all;
  for (const auto& line : diloco) all << line << "\n";
  for (const char* name : {"bits_per_sync", "replica_drift", "replica_test"}) {
    EXPECT_NE(all.str().find(name), std::string::npos) << name << " missing in\n" << all.str();
  }
}

TEST(StreamingDilocoSchedule, StaggersTheFragmentsThroughThePeriod) {
  std::vector<std::pair<int64_t, size_t>> sends;
  for (int64_t step = 1; step <= 16; ++step) {
    if (const auto p = streamingSender(step, 8, 4)) sends.emplace_back(step, *p);
  }
  const std::vector<std::pair<int64_t, size_t>> expected{{2, 0},  {4, 1},  {6, 2},  {8, 3},
                                                         {10, 0}, {12, 1}, {14, 2}, {16, 3}};
  EXPECT_EQ(sends, expected);
  EXPECT_EQ(streamingSender(5, 5, 1), std::optional<size_t>(0));
  EXPECT_EQ(streamingSender(4, 5, 1), std::nullopt);
}

TEST(StreamingDilocoFragments, StrideModulesInTheOrderOfTheirFirstParameter) {
  const std::vector<std::string> names{"wte.weight",      "h.0.attn.weight", "h.0.attn.bias", "h.0.mlp.weight",
                                       "h.1.attn.weight", "h.1.mlp.weight",  "ln_f.weight",   "scale"};
  // Modules: wte 0, h.0.attn 1, h.0.mlp 2, h.1.attn 3, h.1.mlp 4, ln_f 5, "" 6.
  const std::vector<std::vector<size_t>> two{{0, 3, 5, 7}, {1, 2, 4, 6}};
  EXPECT_EQ(streamingFragments(names, 2), two);
  const std::vector<std::vector<size_t>> three{{0, 4, 7}, {1, 2, 5}, {3, 6}};
  EXPECT_EQ(streamingFragments(names, 3), three);
  EXPECT_EQ(streamingFragments(names, 7).size(), 7u);
  EXPECT_THROW(streamingFragments(names, 8), UserError);
}

// H = 4, F = 2, τ = 1, α = 0.25 (not symmetric, so a swapped α shows), the outer SGD's defaults (lr 0.7, momentum 0.9,
// Nesterov), the exact reducer. Each step rank r adds u_r to every parameter, so θ_r(t) = θ0 + t·u_r. Fragment 0
// (module a) sends after step 2: Δ̄ = mean_r(θ0 − θ_r(2)) = −2ū. After step 3 it applies: the first outer step has v = Δ̄
// and moves θ_g by −lr(Δ̄ + μ v) = 2·lr·(1 + μ)·ū; the worker's fragment becomes α·θ_r(3) + (1 − α)·θ_g. Fragment 1
// (module b) is untouched until its send after step 4.
TEST(StreamingDiloco, AppliesADelayedMixedFragmentAsItsClosedFormSays) {
  testing::runRanks(2, [](comm::Communicator& comm) {
    const auto theta0 = [] {
      return std::vector<at::Tensor>{torch::tensor({1.0, -2.0}, torch::kFloat64).requires_grad_(),
                                     torch::tensor({0.5, 3.0}, torch::kFloat64).requires_grad_()};
    };
    const auto u = [](int r) {
      return std::vector<at::Tensor>{torch::tensor({0.125, -0.25}, torch::kFloat64) * (r + 1),
                                     torch::tensor({0.5, 0.0625}, torch::kFloat64) * (r + 1)};
    };
    Worker w(comm, "streaming-diloco", settingsOf({4, 2, 1, 0.25}), "exact", theta0(), {"a.w", "b.w"});
    const int r = comm.rank();
    for (int64_t step = 1; step <= 3; ++step) {
      w.sync->beforeBackward(false);
      w.sync->afterBackward();
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < 2; ++i) w.params[i].add_(u(r)[i]);
      w.sync->afterStep(step);
      EXPECT_EQ(w.sync->lastSync().has_value(), step == 2) << "step " << step;
      if (step == 2) {
        EXPECT_GT(w.sync->lastSync()->bits, 0u);
        EXPECT_TRUE(torch::allclose(w.params[0], theta0()[0] + 2 * u(r)[0], 0, 1e-15)) << "applied before τ";
      }
    }
    const double lr = 0.7, mu = 0.9, alpha = 0.25;
    const auto mean_u = (u(0)[0] + u(1)[0]) / 2;
    const auto global_a = theta0()[0] + 2 * lr * (1 + mu) * mean_u;
    const auto local_a = theta0()[0] + 3 * u(r)[0];
    EXPECT_TRUE(torch::allclose(w.params[0], alpha * local_a + (1 - alpha) * global_a, 0, 1e-12)) << w.params[0];
    EXPECT_TRUE(torch::allclose(w.params[1], theta0()[1] + 3 * u(r)[1], 0, 1e-15)) << w.params[1];
    w.sync->beforeEvaluation();
    EXPECT_TRUE(torch::allclose(w.params[0], global_a, 0, 1e-12)) << "the global model: " << w.params[0];
    EXPECT_TRUE(torch::equal(w.params[1], theta0()[1])) << "the global model: " << w.params[1];
    w.sync->afterEvaluation();
  });
}

// Saved after step 2, with fragment 0's result in flight until step 3; powersgd with error feedback.
TEST(StreamingDiloco, ResumesWithAFragmentInFlightBitForBit) {
  testing::runRanks(2, [](comm::Communicator& comm) {
    const auto settings = settingsOf({4, 2, 1, 0.5});
    auto saved = threeModuleWorker(comm, "streaming-diloco", settings, "powersgd");
    std::vector<int64_t> synced;
    for (int64_t step = 1; step <= 2; ++step) {
      if (trainStep(saved, step, comm.rank())) synced.push_back(step);
    }
    TensorMap state;
    saved.sync->saveState(state);
    EXPECT_EQ(state.at("streaming-diloco/fragment0/applies_at").item<int64_t>(), 3);
    EXPECT_FALSE(
        torch::equal(state.at("streaming-diloco/fragment0/in_flight/in.weight"), torch::zeros_like(saved.params[0])));

    auto restored = threeModuleWorker(comm, "streaming-diloco", settings, "powersgd");
    {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < restored.params.size(); ++i) restored.params[i].copy_(saved.params[i]);
    }
    state["counter/step"] = torch::scalar_tensor(int64_t{2}, torch::kInt64);  // bounds its counts
    restored.sync->loadState(state);
    for (int64_t step = 3; step <= 9; ++step) {
      if (trainStep(saved, step, comm.rank())) synced.push_back(step);
      trainStep(restored, step, comm.rank());
    }
    EXPECT_EQ(synced, (std::vector<int64_t>{2, 4, 6, 8}));
    for (size_t i = 0; i < saved.params.size(); ++i) {
      EXPECT_TRUE(torch::equal(saved.params[i], restored.params[i])) << kThreeModuleNames[i];
    }
    TensorMap saved_end, restored_end;
    saved.sync->saveState(saved_end);
    restored.sync->saveState(restored_end);
    ASSERT_EQ(saved_end.size(), restored_end.size());
    for (const auto& [name, tensor] : saved_end) {
      ASSERT_EQ(restored_end.count(name), 1u) << name;
      EXPECT_TRUE(torch::equal(tensor, restored_end.at(name))) << name;
    }
  });
}

// Steps 1..16 of two workers in lockstep on one group, H = 8, F = 2, τ as given: one whose
// context offers no second group (a ForwardingCommunicator makes none), so its exchanges block at
// their sending steps as before, and one whose exchanges run in the background from their second
// send on. They send the same bits at the same steps and end with the same models and state, bit
// for bit.
class OverlappedExchange : public ::testing::TestWithParam<std::tuple<std::string, int64_t>> {};

TEST_P(OverlappedExchange, GivesTheBlockingExchangesModelBitForBit) {
  const auto& [reducer, delay] = GetParam();
  testing::runRanks(2, [&, reducer = reducer, delay = delay](comm::Communicator& comm) {
    const auto settings = settingsOf({8, 2, delay, 0.5});
    testing::ForwardingCommunicator without_second_group(comm);
    auto blocking = threeModuleWorker(without_second_group, "streaming-diloco", settings, reducer);
    auto overlapped = threeModuleWorker(comm, "streaming-diloco", settings, reducer, /*background=*/true);
    for (int64_t step = 1; step <= 16; ++step) {
      const bool synced = trainStep(blocking, step, comm.rank());
      ASSERT_EQ(trainStep(overlapped, step, comm.rank()), synced) << "step " << step;
      if (synced) EXPECT_EQ(overlapped.sync->lastSync()->bits, blocking.sync->lastSync()->bits) << "step " << step;
    }
    for (size_t i = 0; i < blocking.params.size(); ++i) {
      EXPECT_TRUE(torch::equal(blocking.params[i], overlapped.params[i])) << kThreeModuleNames[i];
    }
    TensorMap blocking_state, overlapped_state;
    blocking.sync->saveState(blocking_state);
    overlapped.sync->saveState(overlapped_state);
    ASSERT_EQ(blocking_state.size(), overlapped_state.size());
    for (const auto& [name, tensor] : blocking_state) {
      ASSERT_EQ(overlapped_state.count(name), 1u) << name;
      EXPECT_TRUE(torch::equal(tensor, overlapped_state.at(name))) << name;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(ReducersAndDelays, OverlappedExchange,
                         ::testing::Combine(::testing::Values("exact", "fp16", "powersgd"),
                                            ::testing::Values(int64_t{1}, int64_t{2})));

// A gate that a test closes and opens, and the collectives that found it closed.
struct Gate {
  std::mutex mutex;
  std::condition_variable changed;
  bool open = true;
  int held = 0;  // collectives that waited behind it

  void set(bool value) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      open = value;
    }
    changed.notify_all();
  }
  // Waits (at most 20 s) for it to open.
  void pass() {
    std::unique_lock<std::mutex> lock(mutex);
    if (!open) ++held;
    changed.notify_all();
    if (!changed.wait_for(lock, std::chrono::seconds(20), [this] { return open; })) {
      throw std::runtime_error("the gate stayed closed");
    }
  }
  // Whether a collective waits behind it (within 10 s).
  bool holdsOne() {
    std::unique_lock<std::mutex> lock(mutex);
    return changed.wait_for(lock, std::chrono::seconds(10), [this] { return held > 0; });
  }
};

// `inner`'s second groups, whose collectives first pass the gate.
class GatedSiblings : public testing::ForwardingCommunicator {
 public:
  GatedSiblings(comm::Communicator& inner, Gate& gate) : ForwardingCommunicator(inner), inner_(inner), gate_(gate) {}
  std::unique_ptr<comm::Communicator> sibling(const std::string& name) override {
    return std::make_unique<Gated>(inner_.sibling(name), gate_);
  }

 private:
  class Gated : public testing::ForwardingCommunicator {
   public:
    Gated(std::unique_ptr<comm::Communicator> own, Gate& gate)
        : ForwardingCommunicator(*own), own_(std::move(own)), gate_(gate) {}
    void allreduceSum(at::Tensor& tensor) override {
      gate_.pass();
      own_->allreduceSum(tensor);
    }
    std::unique_ptr<comm::PendingCollective> allreduceSumAsync(at::Tensor& tensor) override {
      gate_.pass();
      return own_->allreduceSumAsync(tensor);
    }
    std::vector<at::Tensor> allgather(const at::Tensor& tensor) override {
      gate_.pass();
      return own_->allgather(tensor);
    }

   private:
    std::unique_ptr<comm::Communicator> own_;
    Gate& gate_;
  };

  comm::Communicator& inner_;
  Gate& gate_;
};

// H = 4, F = 2, τ = 1: each fragment's first exchange (steps 2 and 4) blocks, which tells its bits;
// fragment 0's second, after step 6, starts on the second group and is still waiting to send when
// the step returns, while the worker computes step 7, at whose end it lands.
TEST(StreamingDiloco, ExchangesInTheBackgroundWhileTheWorkerComputes) {
  testing::runRanks(2, [](comm::Communicator& comm) {
    Gate gate;
    GatedSiblings gated(comm, gate);
    auto w = threeModuleWorker(gated, "streaming-diloco", settingsOf({4, 2, 1, 0.5}), "exact", /*background=*/true);
    for (int64_t step = 1; step <= 5; ++step) trainStep(w, step, comm.rank());
    const auto global_before = [&] {
      w.sync->beforeEvaluation();
      auto copy = w.params[0].detach().clone();
      w.sync->afterEvaluation();
      return copy;
    }();
    gate.set(false);
    EXPECT_TRUE(trainStep(w, 6, comm.rank()));
    EXPECT_TRUE(gate.holdsOne()) << "fragment 0's exchange did not start in the background";
    gate.set(true);
    EXPECT_FALSE(trainStep(w, 7, comm.rank()));
    w.sync->beforeEvaluation();
    EXPECT_FALSE(torch::equal(w.params[0], global_before)) << "fragment 0's result did not land after step 7";
    w.sync->afterEvaluation();
  });
}

// Under output.trace the same exchange is a background collective of step 6, issued by the
// exchange's thread while step 7 computes (a "forward" span, during which the gate holds it) and
// done after that compute. Its issue is the thread's, which may start the collective only once the
// worker is already in step 7: it is not bound to precede the span's start.
TEST(StreamingDiloco, TracesTheExchangeSpanningTheNextStepsCompute) {
  testing::runRanks(2, [](comm::Communicator& comm) {
    trace::Recorder::Options options;
    options.window = StepWindow{1, 8};
    trace::Recorder recorder(options);
    auto& trace = recorder.worker(comm.rank());
    Gate gate;
    GatedSiblings gated(comm, gate);
    TracedCommunicator traced(gated, trace);
    auto w = threeModuleWorker(traced, "streaming-diloco", settingsOf({4, 2, 1, 0.5}), "exact", /*background=*/true);
    for (int64_t step = 1; step <= 6; ++step) {
      if (step == 6) gate.set(false);
      trace.setStep(step);
      trainStep(w, step, comm.rank());
    }
    trace.setStep(7);
    {
      const auto compute = trace.span("forward");
      ASSERT_TRUE(gate.holdsOne());
    }
    gate.set(true);
    trainStep(w, 7, comm.rank());
    const auto& timeline = trace.timeline();
    const auto forward = std::find_if(timeline.spans.begin(), timeline.spans.end(),
                                      [](const trace::Span& s) { return s.name == "forward" && s.step == 7; });
    ASSERT_NE(forward, timeline.spans.end());
    int spanning = 0;
    for (const auto& c : timeline.collectives) {
      if (!c.background) continue;
      EXPECT_EQ(c.step, 6) << "only fragment 0's second exchange runs in the background";
      if (c.issued_us < forward->end_us() && c.done_us > forward->end_us()) ++spanning;
    }
    EXPECT_EQ(spanning, 1);
  });
}

std::string refusal(const Streaming& s) {
  std::string message;
  testing::runRanks(1, [&](comm::Communicator& comm) {
    try {
      threeModuleWorker(comm, "streaming-diloco", settingsOf(s), "exact");
    } catch (const UserError& e) {
      message = e.what();
    }
  });
  return message;
}

TEST(StreamingDiloco, RefusesMoreFragmentsThanModulesOrStepsAndADelayPastTheNextSend) {
  EXPECT_EQ(refusal({8, 4, 0, 0.5}),
            "sync.fragments = 4: at most the model's 3 modules (parameters grouped by their name up to the last '.')");
  EXPECT_EQ(refusal({2, 3, 0, 0.5}),
            "sync.fragments = 3: at most sync.every (2), so that each fragment sends at a "
            "step of its own");
  EXPECT_EQ(refusal({8, 2, 4, 0.5}),
            "sync.delay = 4: below sync.every / sync.fragments (4), so that a fragment's "
            "result lands before its next send");
  EXPECT_EQ(refusal({8, 2, 3, 0.5}), "") << "τ = 3 lands before the next send";
}

TEST(StreamingDiloco, RefusesItsScheduleWhenTheExperimentIsResolved) {
  const auto& validate = synchronizerRegistry().at("streaming-diloco").factory.validate;
  ExperimentConfig config;
  config.sync.settings = settingsOf({2, 3, 0, 0.5});
  EXPECT_THROW(validate(config), UserError);
  config.sync.settings = settingsOf({8, 2, 4, 0.5});
  EXPECT_THROW(validate(config), UserError);
  config.sync.settings = settingsOf({8, 2, 3, 0.5});
  EXPECT_NO_THROW(validate(config));
}

}  // namespace
}  // namespace gcrun::experiments
