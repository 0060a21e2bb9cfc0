#include <gtest/gtest.h>

#include <cmath>

#include <torch/torch.h>

#include "hyperparams/base/errors.h"
#include "reducers/reducer.h"
#include "reducers/tensor_buffer.h"
#include "reducers/tensor_costs.h"
#include "tests/support/multi_rank.h"
#include "tests/support/reducer_fixtures.h"
#include "tests/support/reducer_inputs.h"

namespace gcrun::reducers {
namespace {

using testing::buildReducer;
using testing::clones;

using testing::runRanks;

void expectIdenticalOnAllRanks(Communicator& comm, const at::Tensor& t) {
  for (const auto& other : comm.allgather(t)) EXPECT_TRUE(torch::equal(other, t));
}

// ---------------------------------------------------------------------------------------------
// Invariants every registered reducer keeps, for world sizes 1 to 4.

// Reducers that sum 16-bit floats on the wire round every addition by up to the format's epsilon
// of the summands, and that rounding belongs to no worker's memory; the others deliver exactly what
// they keep.
double wireSummationEpsilon(const std::string& name) {
  if (name == "fp16") return std::ldexp(1.0, -10);
  if (name == "bf16") return std::ldexp(1.0, -7);
  return 0.0;
}

class EveryReducer : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(EveryReducer, KeepsTheSharedInvariants) {
  const auto [name, world_size] = GetParam();
  runRanks(world_size, [&, name = name](Communicator& comm) {
    auto reducer = buildReducer(name, comm);
    for (int step = 0; step < 3; ++step) {
      auto b = makeInputs(mixedShapes(), comm.rank(), step);
      auto sent = clones(b.send);
      uint64_t bits = reducer->reduce(b.send, b.out, b.memory);
      EXPECT_GT(bits, 0u);
      // Every worker sends a message of the same size (unbiased-rank's alternates between steps).
      auto all_bits = comm.allgather(torch::tensor({static_cast<int64_t>(bits)}));
      for (const auto& other : all_bits) EXPECT_EQ(other.item<int64_t>(), static_cast<int64_t>(bits));
      // Per-layer statistics: every built-in splits what it sent between the tensors, exactly.
      const auto costs = reducer->lastCosts();
      ASSERT_EQ(costs.size(), b.send.size()) << name;
      uint64_t split = 0;
      for (const auto& cost : costs) split += cost.bits;
      EXPECT_EQ(split, bits) << name << " step " << step;
      for (size_t i = 0; i < b.out.size(); ++i) {
        EXPECT_TRUE(torch::isfinite(b.out[i]).all().item<bool>()) << "tensor " << i;
        EXPECT_TRUE(torch::isfinite(b.memory[i]).all().item<bool>()) << "tensor " << i;
        expectIdenticalOnAllRanks(comm, b.out[i]);
        // What the workers delivered (input minus what they keep) averages to the shared update.
        auto delivered = meanOverRanks(comm, sent[i] - b.memory[i]);
        auto tolerance =
            1e-5 + 1e-4 * b.out[i].abs() + wireSummationEpsilon(name) * world_size * meanOverRanks(comm, sent[i].abs());
        EXPECT_TRUE((delivered - b.out[i]).abs().le(tolerance).all().item<bool>()) << name << " tensor " << i;
      }
    }
  });
}

TEST_P(EveryReducer, IsDeterministicForAFixedSeed) {
  const auto [name, world_size] = GetParam();
  runRanks(world_size, [&, name = name](Communicator& comm) {
    auto first = buildReducer(name, comm);
    auto second = buildReducer(name, comm);
    for (int step = 0; step < 2; ++step) {
      auto a = makeInputs(mixedShapes(), comm.rank(), step);
      auto b = makeInputs(mixedShapes(), comm.rank(), step);
      first->reduce(a.send, a.out, a.memory);
      second->reduce(b.send, b.out, b.memory);
      for (size_t i = 0; i < a.out.size(); ++i) {
        EXPECT_TRUE(torch::equal(a.out[i], b.out[i]));
        EXPECT_TRUE(torch::equal(a.memory[i], b.memory[i]));
      }
    }
  });
}

// The trainer's layout: every tensor a view of one flat buffer, in reverse order.
std::vector<at::Tensor> flatViewsOf(const std::vector<at::Tensor>& tensors) {
  int64_t total = 0;
  for (const auto& t : tensors) total += t.numel();
  auto flat = torch::empty({total});
  std::vector<at::Tensor> views(tensors.size());
  int64_t offset = 0;
  for (size_t k = tensors.size(); k-- > 0;) {
    views[k] = flat.narrow(0, offset, tensors[k].numel()).view(tensors[k].sizes());
    views[k].copy_(tensors[k]);
    offset += tensors[k].numel();
  }
  return views;
}

// As the trainer calls it: memory is the send buffer itself, a flat view, and ready() comes first,
// in an order that differs between ranks. The results must be those of separate buffers.
TEST_P(EveryReducer, GivesTheSameResultsInPlaceAfterReadyCallsInAnyOrder) {
  const auto [name, world_size] = GetParam();
  runRanks(world_size, [&, name = name](Communicator& comm) {
    auto separate = buildReducer(name, comm);
    auto in_place = buildReducer(name, comm);
    for (int step = 0; step < 3; ++step) {
      auto a = makeInputs(mixedShapes(), comm.rank(), step);
      auto b = makeInputs(mixedShapes(), comm.rank(), step);
      separate->reduce(a.send, a.out, a.memory);
      const auto send = flatViewsOf(b.send);
      const size_t n = send.size();
      for (size_t j = 0; j < n; ++j) in_place->ready((comm.rank() % 2 == 0) ? j : n - 1 - j, send);
      in_place->reduce(send, b.out, send);
      // Summed in place, tensors may sit in another order in the collective: float rounding.
      for (size_t i = 0; i < n; ++i) {
        EXPECT_TRUE(torch::allclose(a.out[i], b.out[i], 1e-5, 1e-6)) << name << " step " << step << " out " << i;
        EXPECT_TRUE(torch::allclose(a.memory[i], send[i], 1e-5, 1e-6)) << name << " step " << step << " memory " << i;
      }
    }
  });
}

// The trainer hands a lossless reducer its gradients as both send and out, with a zero memory
// (reducer.h): the average lands in the send, the same as into separate buffers, and the memory
// stays zero.
TEST(LosslessReducers, AverageInPlaceWhenOutIsTheSend) {
  for (const auto* entry : reducerRegistry().entries()) {
    if (!entry->factory.lossless) continue;
    for (int world_size : {1, 2, 3}) {
      runRanks(world_size, [&](Communicator& comm) {
        auto separate = buildReducer(entry->name, comm);
        auto in_place = buildReducer(entry->name, comm);
        for (int step = 0; step < 2; ++step) {
          auto a = makeInputs(mixedShapes(), comm.rank(), step);
          auto b = makeInputs(mixedShapes(), comm.rank(), step);
          separate->reduce(a.send, a.out, a.memory);
          const auto send = flatViewsOf(b.send);
          for (auto& m : b.memory) m.zero_();
          for (size_t j = 0; j < send.size(); ++j) in_place->ready(j, send);
          in_place->reduce(send, send, b.memory);
          for (size_t i = 0; i < send.size(); ++i) {
            // Gloo's ring sums 3 ranks in an order that depends on where a tensor sits.
            EXPECT_TRUE(torch::allclose(a.out[i], send[i], 1e-6, 1e-7)) << entry->name << " out " << i;
            EXPECT_TRUE(torch::equal(b.memory[i], torch::zeros_like(b.memory[i]))) << entry->name << " memory " << i;
          }
        }
      });
    }
  }
}

std::vector<std::tuple<std::string, int>> everyReducerAndWorldSize() {
  std::vector<std::tuple<std::string, int>> cases;
  for (const auto* entry : reducerRegistry().entries()) {
    for (int world_size : {1, 2, 3, 4}) cases.emplace_back(entry->name, world_size);
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Registry, EveryReducer, ::testing::ValuesIn(everyReducerAndWorldSize()), [](const auto& info) {
  auto name = std::get<0>(info.param);
  for (auto& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name + "_world" + std::to_string(std::get<1>(info.param));
});

// ---------------------------------------------------------------------------------------------
// exact

// Counts the collectives started asynchronously, passing every call on.
class CountingCommunicator : public testing::ForwardingCommunicator {
 public:
  using ForwardingCommunicator::ForwardingCommunicator;
  std::unique_ptr<PendingCollective> allreduceSumAsync(at::Tensor& tensor) override {
    ++started;
    return ForwardingCommunicator::allreduceSumAsync(tensor);
  }
  int started = 0;
};

// DDP's buckets: in reverse order, the first up to 1 MiB, then 25 MiB; each all-reduced as soon as
// it and every bucket before it are ready, whatever order the ranks' gradients arrive in.
TEST(ExactReducer, StartsEachBucketOnceItIsReadyInTheSameOrderOnEveryRank) {
  runRanks(2, [&](Communicator& group) {
    CountingCommunicator comm(group);
    auto reducer = buildReducer("exact", comm);
    const int64_t quarter_mib = (1 << 20) / 16;  // floats
    // Reverse order: [4] alone (>= 1 MiB) is bucket 0, [3, 2, 1, 0] bucket 1.
    std::vector<int64_t> sizes{quarter_mib, quarter_mib, quarter_mib, quarter_mib, 5 * quarter_mib};
    for (int step = 0; step < 2; ++step) {
      comm.started = 0;
      std::vector<at::Tensor> send, out, memory;
      for (size_t i = 0; i < sizes.size(); ++i) {
        send.push_back(torch::full({sizes[i]}, static_cast<float>(comm.rank() + 1 + i + step)));
        out.push_back(torch::empty({sizes[i]}));
        memory.push_back(torch::full({sizes[i]}, 7.0f));
      }
      // Rank 0 sees its gradients backwards, rank 1 forwards: bucket 0 only starts with tensor 4.
      std::vector<size_t> order{4, 3, 2, 1, 0};
      if (comm.rank() == 1) std::reverse(order.begin(), order.end());
      reducer->ready(order[0], send);
      reducer->ready(order[1], send);
      EXPECT_EQ(comm.started, comm.rank() == 0 ? 1 : 0);
      for (size_t k = 2; k < order.size(); ++k) reducer->ready(order[k], send);
      EXPECT_EQ(comm.started, 2);
      const uint64_t bits = reducer->reduce(send, out, memory);
      EXPECT_EQ(bits, 32u * 9 * static_cast<uint64_t>(quarter_mib));
      for (size_t i = 0; i < sizes.size(); ++i) {
        EXPECT_TRUE(out[i].eq(1.5f + i + step).all().item<bool>()) << "tensor " << i;
        EXPECT_TRUE(memory[i].eq(0).all().item<bool>());
      }
    }
  });
}

TEST(TensorBuffer, OverTensorsBackToBackIsAViewThatCopiesNothing) {
  auto flat = torch::arange(10, torch::kFloat32);
  std::vector<at::Tensor> parts{flat.narrow(0, 6, 4).view({2, 2}), flat.narrow(0, 0, 6)};  // out of order
  auto buffer = TensorBuffer::over(parts);
  EXPECT_EQ(buffer.flat().data_ptr(), flat.data_ptr());
  EXPECT_EQ(buffer.numel(), 10);
  buffer.pack(parts);  // nothing to copy
  buffer.flat().add_(1);
  buffer.unpack(parts, 0.5);
  EXPECT_TRUE(torch::equal(flat, (torch::arange(10, torch::kFloat32) + 1) * 0.5));
  // Into other tensors: a scaled copy of each slice, in the list's order.
  std::vector<at::Tensor> others{torch::empty({2, 2}), torch::empty({6})};
  buffer.unpack(others, 2.0);
  EXPECT_TRUE(torch::equal(others[0].reshape({-1}), torch::arange(7, 11, torch::kFloat32)));
  EXPECT_TRUE(torch::equal(others[1], torch::arange(1, 7, torch::kFloat32)));
}

TEST(TensorBuffer, OverSeparateOrGappedTensorsPacksACopy) {
  auto flat = torch::arange(10, torch::kFloat32);
  for (const auto& parts :
       std::vector<std::vector<at::Tensor>>{{torch::ones({3}), torch::zeros({2})},             // separate storages
                                            {flat.narrow(0, 0, 3), flat.narrow(0, 4, 3)},      // a gap
                                            {flat.view({2, 5}).t(), flat.narrow(0, 0, 0)}}) {  // not contiguous
    auto buffer = TensorBuffer::over(parts);
    EXPECT_NE(buffer.flat().data_ptr(), flat.data_ptr());
    buffer.pack(parts);
    buffer.flat().zero_();
    EXPECT_TRUE(torch::equal(flat, torch::arange(10, torch::kFloat32)));  // untouched
  }
}

TEST(ExactReducer, AveragesOverRanksAndSendsEveryFloat) {
  for (int world_size : {1, 2, 3, 4}) {
    runRanks(world_size, [&](Communicator& comm) {
      auto reducer = buildReducer("exact", comm);
      Buffers b;
      for (const auto& shape : mixedShapes()) {
        b.send.push_back(torch::full(shape, static_cast<float>(comm.rank() + 1)));
        b.out.push_back(torch::empty(shape));
        b.memory.push_back(torch::ones(shape));
      }
      uint64_t bits = reducer->reduce(b.send, b.out, b.memory);
      const auto costs = reducer->lastCosts();
      ASSERT_EQ(costs.size(), b.send.size());
      int64_t numel = 0;
      for (size_t i = 0; i < b.out.size(); ++i) {
        numel += b.out[i].numel();
        EXPECT_EQ(costs[i].bits, 32u * static_cast<uint64_t>(b.out[i].numel())) << "tensor " << i;
        EXPECT_EQ(costs[i].rank, 0);
        // mean of 1..W
        EXPECT_TRUE(torch::allclose(b.out[i], torch::full_like(b.out[i], (world_size + 1) / 2.0)));
        EXPECT_EQ(b.memory[i].abs().sum().item<float>(), 0.0f);
      }
      EXPECT_EQ(bits, 32u * static_cast<uint64_t>(numel));
    });
  }
}

// A message shared by tensors is split by their weights, rounded so that the parts add up.
TEST(TensorCosts, SplitInProportionAddsUpExactly) {
  EXPECT_EQ(splitInProportion(10, {1, 1, 1}), (std::vector<uint64_t>{3, 3, 4}));
  EXPECT_EQ(splitInProportion(16, {1, 0, 3}), (std::vector<uint64_t>{4, 0, 12}));
  EXPECT_EQ(splitInProportion(7, {0, 0}), (std::vector<uint64_t>{3, 4}));
  EXPECT_TRUE(splitInProportion(5, {}).empty());
  // Near the top of both ranges, without overflow.
  const uint64_t total = uint64_t{1} << 62;
  const auto parts = splitInProportion(total, {int64_t{1} << 61, int64_t{1} << 61});
  EXPECT_EQ(parts, (std::vector<uint64_t>{total / 2, total / 2}));
}

// Between 2 Gloo ranks an all-gather is a swap over the pair (comm/process_group.cpp): it lists
// both tensors in rank order, also while sums are in flight, and those sums come out as the two
// tensors added.
TEST(Communicator, TwoGlooRanksGatherBySwapWhileSumsAreInFlight) {
  const std::vector<int64_t> sizes{1, 1000, 300001};
  auto valuesOf = [](int rank, int64_t n, at::ScalarType type) {
    auto generator = at::detail::createCPUGenerator(77 + rank + n);
    return torch::randn({n}, generator, torch::kFloat64).mul_(1e3).to(type);
  };
  runRanks(2, [&](Communicator& comm) {
    ASSERT_EQ(comm.backend(), "gloo");
    std::vector<at::Tensor> tensors;
    std::vector<std::unique_ptr<PendingCollective>> pending;
    for (int64_t n : sizes) {
      tensors.push_back(valuesOf(comm.rank(), n, at::kFloat));
      pending.push_back(comm.allreduceSumAsync(tensors.back()));
    }
    std::vector<std::vector<at::Tensor>> gathered;
    for (auto type : {at::kFloat, at::kLong}) gathered.push_back(comm.allgather(valuesOf(comm.rank(), 4097, type)));
    gathered.push_back(comm.allgather(valuesOf(comm.rank(), 5000, at::kFloat).view(at::kByte)));
    for (size_t k = pending.size(); k-- > 0;) pending[k]->wait();
    for (size_t k = 0; k < sizes.size(); ++k) {
      const auto expected = valuesOf(0, sizes[k], at::kFloat) + valuesOf(1, sizes[k], at::kFloat);
      EXPECT_TRUE(torch::equal(tensors[k], expected)) << sizes[k];
    }
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(gathered[0].size(), 2u);
      EXPECT_TRUE(torch::equal(gathered[0][r], valuesOf(r, 4097, at::kFloat))) << "rank " << r;
      EXPECT_TRUE(torch::equal(gathered[1][r], valuesOf(r, 4097, at::kLong))) << "rank " << r;
      EXPECT_TRUE(torch::equal(gathered[2][r], valuesOf(r, 5000, at::kFloat).view(at::kByte))) << "rank " << r;
    }
  });
}

TEST(ReducerRegistry, UnknownNameListsTheKnownOnes) {
  try {
    reducerRegistry().at("powersdg");
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown reducer 'powersdg'"), std::string::npos) << e.what();
    for (const char* known : {"exact", "powersgd", "topk", "qsgd"}) {
      EXPECT_NE(std::string(e.what()).find(known), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace gcrun::reducers
