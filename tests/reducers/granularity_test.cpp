// What surrounds the reducers: granularity, config refusals, sampled compression metrics, the
// reducer benchmark.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "experiments/bench/reducer_benchmark.h"
#include "experiments/setup/resolved_experiment.h"
#include "experiments/worker/runner.h"
#include "hyperparams/base/errors.h"
#include "reducers/granularity.h"
#include "reducers/reducer.h"
#include "tests/support/benchmark_table.h"
#include "tests/support/multi_rank.h"
#include "tests/support/temp_dir.h"

namespace gcrun {
namespace {

using comm::Communicator;
using reducers::Reducer;
using testing::runRanks;
using testing::TempDir;

const std::vector<std::vector<int64_t>> kShapes = {{3, 4}, {5}, {2, 3}, {4, 2, 2}};  // 12 + 5 + 6 + 16 = 39

// A worker's gradients of kShapes in float64, N(0, 1) from a generator seeded by its rank, so any
// thread can recompute any rank's.
std::vector<at::Tensor> filled(int rank) {
  auto generator = at::detail::createCPUGenerator(100 + rank);
  std::vector<at::Tensor> tensors;
  for (const auto& shape : kShapes) tensors.push_back(torch::randn(shape, generator, torch::kFloat64));
  return tensors;
}

std::vector<at::Tensor> like(const std::vector<at::Tensor>& tensors, double fill) {
  std::vector<at::Tensor> out;
  for (const auto& t : tensors) out.push_back(torch::full_like(t, fill));
  return out;
}

ReducerOptions optionsFor(const std::string& name, const std::string& granularity, int64_t rank = 4) {
  ReducerOptions options;
  options.name = name;
  options.granularity = enumFromName<Granularity>(granularity);
  options.settings["rank"] = int64_t{rank};
  // bucket_mb small enough to split kShapes in float64 (8 bytes each): see BucketPartition.
  options.bucket_mb = 100.0 / (1024 * 1024);
  return options;
}

std::unique_ptr<Reducer> make(Communicator& comm, const ReducerOptions& options) {
  return reducers::withGranularity(
      reducers::reducerRegistry().at(options.name).factory.make({comm, options, 7, /*parameters=*/{}}), options);
}

TEST(Granularity, SquareSideIsTheCeilingOfTheSquareRoot) {
  const std::vector<std::pair<int64_t, int64_t>> cases = {{0, 0},  {1, 1},  {2, 2},  {4, 2},          {5, 3},
                                                          {39, 7}, {49, 7}, {50, 8}, {11173962, 3343}};
  for (const auto& [numel, side] : cases) EXPECT_EQ(reducers::squareSide(numel), side) << numel;
}

TEST(Granularity, BucketPartitionFollowsDdp) {
  // float32 tensors of 400, 800, 1200, 1600 bytes; buckets of 2000 bytes, filled from the last.
  std::vector<at::Tensor> tensors;
  for (int64_t n : {100, 200, 300, 400}) tensors.push_back(torch::zeros({n}));
  EXPECT_EQ(reducers::bucketGroups(tensors, 2000), (reducers::TensorGroups{{3, 2}, {1, 0}}));
  EXPECT_EQ(reducers::bucketGroups(tensors, 1), (reducers::TensorGroups{{3}, {2}, {1}, {0}}));
  EXPECT_EQ(reducers::bucketGroups(tensors, 1 << 30), (reducers::TensorGroups{{3, 2, 1, 0}}));
  // A change of dtype closes the bucket, as DDP buckets by dtype.
  tensors[1] = torch::zeros({200}, torch::kFloat64);
  EXPECT_EQ(reducers::bucketGroups(tensors, 1 << 30), (reducers::TensorGroups{{3, 2}, {1}, {0}}));
  // kShapes in float64 at the tests' bucket_mb of 100 bytes: 128 | 48 + 40 = 88, then + 96.
  EXPECT_EQ(reducers::bucketGroups(filled(0), 100), (reducers::TensorGroups{{3}, {2, 1, 0}}));
}

// The exact reducer's all-reduce buckets (and gcrun plan's every-step messages): DDP's first
// bucket of at most 1 MiB, then reducer.bucket_mb ones, filled from the last tensor.
TEST(Granularity, DdpBucketsStartWithASmallFirstOne) {
  constexpr int64_t kMiB = 1 << 20;
  const int64_t cap = 25 * kMiB;
  EXPECT_EQ(reducers::ddpBuckets({2 * kMiB, kMiB / 2, kMiB / 2, kMiB / 2}, cap),
            (reducers::TensorGroups{{3, 2}, {1, 0}}));
  EXPECT_EQ(reducers::ddpBuckets({30 * kMiB, 30 * kMiB, 30 * kMiB}, cap), (reducers::TensorGroups{{2}, {1}, {0}}));
  EXPECT_EQ(reducers::ddpBuckets({10 * kMiB, 10 * kMiB, 10 * kMiB, kMiB}, cap),
            (reducers::TensorGroups{{3}, {2, 1, 0}}));
  EXPECT_TRUE(reducers::ddpBuckets({}, cap).empty());
  // A cap under 1 MiB (a small reducer.bucket_mb) is the first bucket's too.
  EXPECT_EQ(reducers::ddpBuckets({400, 400, 400, 400}, 800), (reducers::TensorGroups{{3, 2}, {1, 0}}));
}

TEST(Granularity, UnknownGranularityIsAUserError) {
  try {
    experiments::layeredConfig("fashion-sgd", "", {"reducer.granularity=row"});
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("reducer.granularity"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layer, model, bucket"), std::string::npos) << e.what();
  }
}

// Exact averaging at every granularity, and PowerSGD at full rank, give the exact mean on every
// rank: the regrouping and padding lose nothing. Memory is zero for exact and this worker's send
// minus the delivered mean for PowerSGD.
void expectExactMean(const std::string& reducer, const std::string& granularity, int64_t rank) {
  constexpr int kWorld = 2;
  runRanks(kWorld, [&](Communicator& comm) {
    auto options = optionsFor(reducer, granularity, rank);
    // Gram-Schmidt's epsilon would shrink P's columns by up to eps / |column|.
    options.settings["orthogonalization_epsilon"] = double{0};
    auto r = make(comm, options);
    for (int step = 0; step < 2; ++step) {
      auto send = filled(comm.rank());
      auto out = like(send, -99);
      auto memory = like(send, -99);
      r->reduce(send, out, memory);
      const auto first = filled(0), second = filled(1), own = filled(comm.rank());
      for (size_t i = 0; i < kShapes.size(); ++i) {
        const auto mean = (first[i] + second[i]) / kWorld;
        EXPECT_LT((out[i] - mean).abs().max().item<double>(), 1e-10)
            << reducer << " " << granularity << " tensor " << i;
        const auto lost = reducer == "exact" ? torch::zeros_like(own[i]) : own[i] - out[i];
        EXPECT_LT((memory[i] - lost).abs().max().item<double>(), 1e-12)
            << reducer << " " << granularity << " tensor " << i;
      }
    }
  });
}

TEST(Granularity, ExactGivesTheMeanAtEveryGranularity) {
  for (const char* granularity : {"layer", "model", "bucket"}) expectExactMean("exact", granularity, 4);
}

TEST(Granularity, FullRankPowerSgdGivesTheMean) {
  // model: the 39 elements in a 7x7 square, whose last row is padding: rank 6. bucket: a 4x4 and a
  // 5x5 square of full rank. Rank 6 spans every one's range, so P P^T M = M.
  expectExactMean("powersgd", "model", 6);
  expectExactMean("powersgd", "bucket", 6);
}

// layers.csv at model granularity: the 7x7 square's P and Q (7x6 each, float64) split between the
// four tensors by their 12, 5, 6 and 16 elements, every one at the square's rank.
TEST(Granularity, SplitsTheGroupsCostBetweenItsTensors) {
  runRanks(2, [&](Communicator& comm) {
    auto r = make(comm, optionsFor("powersgd", "model", 6));
    auto send = filled(comm.rank());
    auto out = like(send, 0);
    auto memory = like(send, 0);
    const uint64_t bits = r->reduce(send, out, memory);
    EXPECT_EQ(bits, 64u * 2 * 7 * 6);
    const auto costs = r->lastCosts();
    ASSERT_EQ(costs.size(), kShapes.size());
    const std::vector<uint64_t> expected = {1654, 689, 827, 2206};  // floor(5376 * running elements / 39)
    for (size_t i = 0; i < costs.size(); ++i) {
      EXPECT_EQ(costs[i].bits, expected[i]) << "tensor " << i;
      EXPECT_EQ(costs[i].rank, 6) << "tensor " << i;
    }
  });
}

// Halves what it is sent, as a reducer that delivers half and loses half would; records what it
// saw and then scribbles over its send buffers, which the contract allows.
class HalvingReducer : public Reducer {
 public:
  uint64_t reduce(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& out,
                  const std::vector<at::Tensor>& memory) override {
    seen.clear();
    for (size_t i = 0; i < send.size(); ++i) {
      seen.push_back(send[i].clone());
      out[i].copy_(send[i] * 0.5);
      memory[i].copy_(send[i] - out[i]);
      send[i].fill_(7);
    }
    return 0;
  }
  std::vector<at::Tensor> seen;
};

TEST(Granularity, WrapperKeepsTheMemoryContract) {
  for (const char* granularity : {"model", "bucket"}) {
    auto inner = std::make_unique<HalvingReducer>();
    auto* halving = inner.get();
    auto wrapped = reducers::withGranularity(std::move(inner), optionsFor("exact", granularity));
    for (int step = 0; step < 2; ++step) {
      const auto send = filled(step);
      auto out = like(send, -99);
      auto memory = like(send, -99);
      wrapped->reduce(send, out, memory);
      for (size_t i = 0; i < send.size(); ++i) {
        EXPECT_TRUE(torch::allclose(out[i], filled(step)[i] * 0.5)) << granularity << " " << i;
        EXPECT_TRUE(torch::allclose(memory[i], filled(step)[i] * 0.5)) << granularity << " " << i;
      }
      // The inner reducer sees one zero-padded square per group, whatever it left there last time.
      // model: all 39 elements in a 7x7 square; bucket: {3} in 4x4, then {2, 1, 0} (23) in 5x5.
      const bool model = std::string(granularity) == "model";
      const auto sides = model ? std::vector<int64_t>{7} : std::vector<int64_t>{4, 5};
      const auto numels = model ? std::vector<int64_t>{39} : std::vector<int64_t>{16, 23};
      ASSERT_EQ(halving->seen.size(), sides.size());
      for (size_t g = 0; g < sides.size(); ++g) {
        const auto& square = halving->seen[g];
        const int64_t numel = numels[g];
        EXPECT_EQ(square.sizes(), (at::IntArrayRef{sides[g], sides[g]}));
        EXPECT_EQ(square.view({-1}).narrow(0, numel, square.numel() - numel).abs().sum().item<double>(), 0)
            << granularity << " step " << step;
      }
    }
  }
}

// Registered by the tests below: a reducer that refuses error feedback and one that only works
// per layer.
void registerRestrictedReducers() {
  auto exact = reducers::reducerRegistry().at("exact").factory;
  exact.reference_name.clear();  // the reference's ExactReducer stays the built-in
  auto no_memory = exact;
  no_memory.supports_memory = false;
  reducers::reducerRegistry().add("infra-no-memory", "exact without error feedback (test)", no_memory);
  auto layer_only = exact;
  layer_only.granularities = {Granularity::layer};
  reducers::reducerRegistry().add("infra-layer-only", "exact per layer only (test)", layer_only);
}

void expectRefused(const std::vector<std::string>& assignments, const std::string& key, const std::string& part) {
  auto config = experiments::layeredConfig("fashion-sgd", "", assignments);
  try {
    experiments::resolve(config);
    FAIL() << "accepted";
  } catch (const UserError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind(key + ":", 0), 0u) << message;
    EXPECT_NE(message.find(part), std::string::npos) << message;
  }
}

TEST(ReducerConfig, RefusesMemoryOrGranularityTheReducerDoesNotSupport) {
  registerRestrictedReducers();
  expectRefused({"reducer.name=infra-no-memory", "optimizer.memory=true"}, "optimizer.memory", "infra-no-memory");
  EXPECT_NO_THROW(experiments::resolve(
      experiments::layeredConfig("fashion-sgd", "", {"reducer.name=infra-no-memory", "optimizer.memory=false"})));
  expectRefused({"reducer.name=infra-layer-only", "reducer.granularity=model"}, "reducer.granularity", "layer");
  for (const char* granularity : {"layer", "model", "bucket"}) {
    for (const char* reducer : {"exact", "powersgd"}) {
      EXPECT_NO_THROW(experiments::resolve(experiments::layeredConfig(
          "fashion-sgd", "",
          {std::string("reducer.name=") + reducer, std::string("reducer.granularity=") + granularity})))
          << reducer << " " << granularity;
    }
  }
}

std::vector<std::string> readLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

double numberAfter(const std::string& line, const std::string& field) {
  const auto at = line.find("\"" + field + "\":");
  EXPECT_NE(at, std::string::npos) << line;
  return std::stod(line.substr(line.find(':', at) + 1));
}

TEST(SampledMetrics, EveryLogIntervalInMetricsJsonl) {
  TempDir dir;
  auto config =
      experiments::layeredConfig("fashion-powersgd-rank2", "",
                                 {"reducer.rank=1", "reducer.granularity=bucket", "task.synthetic=true",
                                  "training.max_steps=4", "output.log_every_steps=2", "output.sinks=[jsonl]"});
  runRanks(1,
           [&](Communicator& comm) { experiments::runWorker(experiments::resolve(config), {dir.file("run")}, comm); });
  std::map<std::string, std::vector<std::pair<int64_t, double>>> sampled;
  for (const auto& line : readLines(dir.file("run") + "/metrics.jsonl")) {
    for (const char* name : {"grad_norm", "memory_norm", "rel_compression_error"}) {
      if (line.find(std::string("\"name\": \"") + name + "\"") == std::string::npos &&
          line.find(std::string("\"name\":\"") + name + "\"") == std::string::npos) {
        continue;
      }
      EXPECT_NE(line.find("\"train\""), std::string::npos) << line;
      sampled[name].push_back({static_cast<int64_t>(numberAfter(line, "step")), numberAfter(line, "value")});
    }
  }
  for (const char* name : {"grad_norm", "memory_norm", "rel_compression_error"}) {
    ASSERT_EQ(sampled[name].size(), 2u) << name;
    EXPECT_EQ(sampled[name][0].first, 2) << name;
    EXPECT_EQ(sampled[name][1].first, 4) << name;
    for (const auto& [step, v] : sampled[name]) EXPECT_GT(v, 0) << name << " step " << step;
  }
  // Rank-1 PowerSGD with one worker projects the sent matrix: it loses part of it, never more.
  for (const auto& [step, v] : sampled["rel_compression_error"]) EXPECT_LT(v, 1.0) << step;
}

TEST(ReducerBenchmark, SaneNumbersOnTinyShapes) {
  experiments::ReducerBenchmarkOptions options;
  options.reducers = {"exact", "powersgd"};
  options.world_sizes = {1, 2};
  options.warmup = 1;
  options.repeats = 2;
  const std::vector<experiments::ShapeSet> sets = {{"tiny", {{"w", {8, 6}}, {"b", {5}}}}};  // 48 + 5 floats
  int streamed = 0;
  const auto rows = experiments::benchmarkReducers(sets, options, [&](const auto&) { ++streamed; });
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(streamed, 4);
  for (const auto& row : rows) {
    EXPECT_TRUE(row.note.empty()) << row.note;
    EXPECT_EQ(row.shapes, "tiny");
    EXPECT_GT(row.seconds, 0);
    EXPECT_LT(row.seconds, 5);
    EXPECT_EQ(row.granularity, "layer");
    if (row.reducer == "exact") {
      EXPECT_EQ(row.bytes, 53u * 4);
      EXPECT_DOUBLE_EQ(row.compression_ratio, 1.0);
      EXPECT_LT(row.relative_error, 1e-6);
    } else {
      // P [8, 4] and Q [6, 4] for the matrix, the vector as is.
      EXPECT_EQ(row.bytes, (32u + 24u + 5u) * 4);
      EXPECT_NEAR(row.compression_ratio, 53.0 / 61.0, 1e-12);
      EXPECT_GT(row.relative_error, 0.01);
      EXPECT_LT(row.relative_error, 1.0);
    }
  }
  EXPECT_EQ(rows[1].workers, 2);
  const auto json = experiments::benchmarkJson(rows, {"a note"});
  EXPECT_NE(json.find("\"reducer\": \"powersgd\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"a note\""), std::string::npos) << json;
  EXPECT_NE(experiments::formatBenchmarkTable(rows).find("powersgd"), std::string::npos);
}

TEST(ReducerBenchmark, UnsupportedGranularityFallsBackToLayer) {
  registerRestrictedReducers();
  experiments::ReducerBenchmarkOptions options;
  options.reducers = {"infra-layer-only"};
  options.world_sizes = {1};
  options.warmup = 0;
  options.repeats = 1;
  options.reducer.granularity = Granularity::model;
  const auto rows = experiments::benchmarkReducers({{"tiny", {{"w", {3, 3}}}}}, options);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].granularity, "layer");
  EXPECT_NE(rows[0].note.find("model"), std::string::npos) << rows[0].note;
  EXPECT_EQ(rows[0].bytes, 36u);
}

}  // namespace
}  // namespace gcrun
