// The powersgd-ddp reducer against PyTorch DDP's powerSGD_hook itself (torch 1.13, two Gloo
// processes: powersgd_ddp_peer.py), bit for bit: on the hook's own inputs, and training the peer's
// model in LibTorch. And its checkpoint state.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "experiments/sync/gradient_hooks.h"
#include "hyperparams/base/errors.h"
#include "reducers/reducer.h"
#include "tests/support/command.h"
#include "tests/support/multi_rank.h"
#include "tests/support/reducer_fixtures.h"
#include "tests/support/reducer_inputs.h"
#include "tests/support/temp_dir.h"

namespace gcrun::reducers {
namespace {

using testing::buildReducer;
using testing::runCommand;
using testing::runRanks;
using testing::TempDir;

// The hook's PowerSGDState and the steps, as the peer and the reducer take them.
struct HookRun {
  int64_t rank = 2;
  int64_t start_iter = 2;
  bool error_feedback = true;
  bool warm_start = true;
  double epsilon = 0;
  int64_t seed = 0;
  double min_compression_rate = 1;
  int steps = 6;

  ReducerOptions reducerOptions() const {
    ReducerOptions options;
    options.settings["rank"] = rank;
    options.settings["start_iter"] = start_iter;
    options.settings["error_feedback"] = error_feedback;
    options.settings["warm_start"] = warm_start;
    options.settings["orthogonalization_epsilon"] = epsilon;
    options.settings["random_seed"] = seed;
    options.settings["min_compression_rate"] = min_compression_rate;
    return options;
  }
  std::string peerArguments() const {
    std::ostringstream args;
    args.precision(17);
    args << rank << ' ' << start_iter << ' ' << error_feedback << ' ' << warm_start << ' ' << epsilon << ' ' << seed
         << ' ' << min_compression_rate << ' ' << steps;
    return args.str();
  }
};

struct Parameter {
  std::string name;
  std::vector<int64_t> shape;
};

std::vector<Parameter> readShapes(const std::string& path) {
  std::vector<Parameter> parameters;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    Parameter p;
    fields >> p.name;
    for (int64_t d; fields >> d;) p.shape.push_back(d);
    parameters.push_back(p);
  }
  return parameters;
}

std::string readText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Raw float32 tensors back to back, shaped as `parameters`.
std::vector<at::Tensor> readTensors(const std::string& path, const std::vector<Parameter>& parameters) {
  const std::string bytes = readText(path);
  std::vector<at::Tensor> tensors;
  size_t offset = 0;
  for (const auto& p : parameters) {
    auto t = torch::empty(p.shape);
    const size_t size = static_cast<size_t>(t.numel()) * sizeof(float);
    if (offset + size > bytes.size()) throw std::runtime_error(path + " is too short");
    std::memcpy(t.data_ptr<float>(), bytes.data() + offset, size);
    offset += size;
    tensors.push_back(t);
  }
  return tensors;
}

std::string registrationOrder(const std::vector<Parameter>& parameters) {
  std::string order;
  for (const auto& p : parameters) order += p.name + "\n";
  return order;
}

// The indices of the parameters named line by line in `order`.
std::vector<size_t> readyIndices(const std::string& order, const std::vector<Parameter>& parameters) {
  std::vector<size_t> indices;
  std::istringstream lines(order);
  for (std::string name; std::getline(lines, name);) {
    const auto found =
        std::find_if(parameters.begin(), parameters.end(), [&](const Parameter& p) { return p.name == name; });
    if (found == parameters.end()) throw std::runtime_error("unknown parameter " + name);
    indices.push_back(static_cast<size_t>(found - parameters.begin()));
  }
  return indices;
}

// powersgd_ddp_peer.py's Tiny in LibTorch, on parameters in its registration order (table, kernel,
// fc1-fc4 and head, weight then bias), with the same ops: autograd then runs the same graph.
at::Tensor tinyLoss(const std::vector<at::Tensor>& p, int rank, int step) {
  auto data = at::detail::createCPUGenerator(1000 * rank + step);
  const auto idx = at::randint(0, 16, {6}, data, at::kLong);
  const auto target = at::randint(0, 5, {6}, data, at::kLong);
  auto x = p[0].index({idx});
  for (size_t layer = 0; layer < 4; ++layer) x = at::tanh(at::linear(x, p[2 + 2 * layer], p[3 + 2 * layer]));
  x = at::tanh(at::matmul(x, p[1].view({8, 8}).t()));
  return at::cross_entropy_loss(at::linear(x, p[10], p[11]), target);
}

// gcrun's side of the peer's training: the same model and data, gradients handed to powersgd-ddp
// from backward's post-hooks as the trainer does (so DDP's rebuilt order comes from LibTorch's
// autograd), SGD as torch.optim.SGD(lr=0.5) applies it. Each step's update must be DDP's.
void expectTheSameTraining(const HookRun& run, const TempDir& dir, const std::vector<Parameter>& parameters) {
  runRanks(2, [&](Communicator& comm) {
    auto reducer = buildReducer("powersgd-ddp", comm, run.reducerOptions());
    std::vector<at::Tensor> params = readTensors(dir.file("init.bin"), parameters), send, out, memory;
    for (auto& p : params) {
      p.set_requires_grad(true);
      send.push_back(torch::empty_like(p));
      out.push_back(torch::empty_like(p));
      memory.push_back(torch::empty_like(p));
    }
    experiments::GradientReadyHooks hooks(params, [&](size_t i) { reducer->ready(i, send); });
    for (int step = 0; step < run.steps; ++step) {
      for (auto& p : params) {
        if (p.grad().defined()) p.mutable_grad().zero_();  // zero_grad(set_to_none=False), torch 1.13's
      }
      tinyLoss(params, comm.rank(), step).backward();
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < params.size(); ++i) send[i].copy_(params[i].grad());
      reducer->reduce(send, out, memory);
      const auto expected = readTensors(
          dir.file("step" + std::to_string(step) + "_rank" + std::to_string(comm.rank()) + "_reduced.bin"), parameters);
      for (size_t i = 0; i < params.size(); ++i) {
        EXPECT_TRUE(torch::equal(out[i], expected[i]))
            << "trained, step " << step << " " << parameters[i].name << ": max |difference| "
            << (out[i] - expected[i]).abs().max().item<float>();
        params[i].add_(out[i], -0.5);
      }
    }
  });
}

// Runs the hook under DDP, then feeds each rank's gradients as the hook got them through
// powersgd-ddp: every step's update must be the one DDP left in .grad, bit for bit.
void expectTheHooksBits(const HookRun& run) {
  if (runCommand("/usr/bin/python3 -c 'import torch, numpy'").exit_code != 0) {
    GTEST_SKIP() << "/usr/bin/python3 has no torch (Debian's python3-torch is the peer)";
  }
  TempDir dir;
  const auto peer = runCommand("/usr/bin/python3 " GCRUN_POWERSGD_DDP_PEER " " + dir.path().string() + " " +
                               run.peerArguments() + " 2>&1");
  ASSERT_EQ(peer.exit_code, 0) << peer.output;
  const auto parameters = readShapes(dir.file("shapes.txt"));
  ASSERT_EQ(parameters.size(), 12u);
  // The bucket the hook got: registration order, then rebuilt once in the order the gradients
  // became ready (not reverse registration: table and kernel are registered before the layers).
  const auto orderAt = [&](int step) { return readText(dir.file("step" + std::to_string(step) + "_rank0_order.txt")); };
  ASSERT_EQ(orderAt(0), registrationOrder(parameters));
  for (int step = 2; step < run.steps; ++step) ASSERT_EQ(orderAt(step), orderAt(1)) << "step " << step;
  const auto ready = readyIndices(orderAt(1), parameters);
  runRanks(2, [&](Communicator& comm) {
    auto reducer = buildReducer("powersgd-ddp", comm, run.reducerOptions());
    for (int step = 0; step < run.steps; ++step) {
      const std::string prefix = dir.file("step" + std::to_string(step) + "_rank" + std::to_string(comm.rank()));
      auto send = readTensors(prefix + "_local.bin", parameters);
      const auto expected = readTensors(prefix + "_reduced.bin", parameters);
      std::vector<at::Tensor> out, memory;
      for (const auto& t : send) {
        out.push_back(torch::empty_like(t));
        memory.push_back(torch::empty_like(t));
      }
      // As gcrun's trainer does from backward's hooks: the order DDP rebuilds its bucket in.
      for (size_t i : ready) reducer->ready(i, send);
      reducer->reduce(send, out, memory);
      for (size_t i = 0; i < out.size(); ++i) {
        EXPECT_TRUE(torch::equal(out[i], expected[i]))
            << "step " << step << " " << parameters[i].name << ": max |difference| "
            << (out[i] - expected[i]).abs().max().item<float>();
      }
    }
  });
  expectTheSameTraining(run, dir, parameters);
}

TEST(PowerSgdDdpReducer, EqualsTheHookWithErrorFeedbackAndWarmStartAfterDdpsRebuild) { expectTheHooksBits(HookRun{}); }

// Rank 3 takes the hook's QR, no warm start draws a seed per step, with an epsilon; compressing
// from the first step, the hook sees DDP's bucket before and after its rebuild.
TEST(PowerSgdDdpReducer, EqualsTheHookWithQrFreshQueriesAndEpsilonBeforeAndAfterTheRebuild) {
  HookRun run;
  run.rank = 3;
  run.start_iter = 0;
  run.error_feedback = false;
  run.warm_start = false;
  run.epsilon = 1e-8;
  run.seed = 12345;
  run.steps = 5;
  expectTheHooksBits(run);
}

ReducerOptions compressingFromTheThirdCall() {
  ReducerOptions options;
  options.settings["rank"] = int64_t{2};
  options.settings["start_iter"] = int64_t{2};
  options.settings["min_compression_rate"] = 1.0;
  options.settings["orthogonalization_epsilon"] = 1e-8;  // mixedShapes() ends with an all-zero matrix
  return options;
}

// After loadState() a fresh reducer continues where the saved one was: iteration, seeds, error and
// warm-start queries.
TEST(PowerSgdDdpReducer, ContinuesFromItsSavedStateBitForBit) {
  runRanks(2, [&](Communicator& comm) {
    auto original = buildReducer("powersgd-ddp", comm, compressingFromTheThirdCall());
    auto resumed = buildReducer("powersgd-ddp", comm, compressingFromTheThirdCall());
    Reducer::State state;
    for (int step = 0; step < 6; ++step) {
      if (step == 3) {
        original->saveState(state);
        resumed->loadState(state);
      }
      auto a = makeInputs(mixedShapes(), comm.rank(), step);
      auto b = makeInputs(mixedShapes(), comm.rank(), step);
      original->reduce(a.send, a.out, a.memory);
      if (step < 3) continue;
      resumed->reduce(b.send, b.out, b.memory);
      for (size_t i = 0; i < a.out.size(); ++i) EXPECT_TRUE(torch::equal(a.out[i], b.out[i])) << "step " << step;
    }
  });
}

// The shared invariants of reducers_test.cpp (which see only the default start_iter's plain
// all-reduce), while compressing: the same update on every rank, whatever order each rank's
// gradients became ready in, and memory = send - update.
TEST(PowerSgdDdpReducer, DeliversOneUpdateAndKeepsWhatItLostWhileCompressing) {
  for (int world_size : {1, 3}) {
    runRanks(world_size, [&](Communicator& comm) {
      auto reducer = buildReducer("powersgd-ddp", comm, compressingFromTheThirdCall());
      for (int step = 0; step < 4; ++step) {
        auto b = makeInputs(mixedShapes(), comm.rank(), step);
        const auto sent = testing::clones(b.send);
        // Ranks whose gradients became ready in different orders agree on rank 0's.
        const size_t n = b.send.size();
        for (size_t j = 0; j < n; ++j) reducer->ready(comm.rank() % 2 == 0 ? j : n - 1 - j, b.send);
        reducer->reduce(b.send, b.out, b.memory);
        for (size_t i = 0; i < b.out.size(); ++i) {
          for (const auto& other : comm.allgather(b.out[i])) EXPECT_TRUE(torch::equal(other, b.out[i]));
          EXPECT_TRUE(torch::equal(b.memory[i], step < 2 ? torch::zeros_like(sent[i]) : sent[i] - b.out[i]))
              << "step " << step << " tensor " << i;
        }
      }
    });
  }
}

// Compressing, it sends the uncompressed tensors, each matrix's P and Q, and splits them per tensor.
TEST(PowerSgdDdpReducer, CountsTheBitsOfWhatItAllReduces) {
  runRanks(2, [&](Communicator& comm) {
    auto reducer = buildReducer("powersgd-ddp", comm, compressingFromTheThirdCall());
    for (int step = 0; step < 3; ++step) {
      auto b = makeInputs(mixedShapes(), comm.rank(), step);
      uint64_t expected = 0;
      for (const auto& t : b.send) {
        const int64_t n = t.dim() == 0 ? 1 : t.size(0), m = t.numel() / n, r = std::min({n, m, int64_t{2}});
        const bool compressed = step == 2 && (n + m) * r < n * m;
        expected += 32 * static_cast<uint64_t>(compressed ? (n + m) * r : t.numel());
      }
      EXPECT_EQ(reducer->reduce(b.send, b.out, b.memory), expected) << "step " << step;
      uint64_t split = 0;
      for (const auto& cost : reducer->lastCosts()) split += cost.bits;
      EXPECT_EQ(split, expected) << "step " << step;
    }
  });
}

TEST(PowerSgdDdpReducer, RefusesWhatPowerSgdStateRefuses) {
  runRanks(1, [&](Communicator& comm) {
    ReducerOptions options;
    options.settings["start_iter"] = int64_t{1};
    EXPECT_THROW(buildReducer("powersgd-ddp", comm, options), UserError);
    options.settings["start_iter"] = int64_t{2};
    options.settings["random_seed"] = int64_t{1} << 32;
    EXPECT_THROW(buildReducer("powersgd-ddp", comm, options), UserError);
  });
}

}  // namespace
}  // namespace gcrun::reducers
