#include "experiments/bench/reducer_benchmark.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/accumulate.h>
#include <spdlog/fmt/fmt.h>
#include <torch/nn/module.h>

#include "experiments/setup/resolved_experiment.h"
#include "hyperparams/base/text.h"
#include "hyperparams/base/units.h"
#include "hyperparams/config_io.h"
#include "outputs/json_document.h"
#include "outputs/statistics.h"
#include "reducers/comm/thread_group.h"
#include "reducers/granularity.h"
#include "reducers/reducer.h"
#include "reducers/tensor_buffer.h"
#include "tasks/models/models.h"
#include "tasks/task.h"

namespace gcrun::experiments {
namespace {

// A peer that fails leaves the others waiting in a collective for this long.
constexpr std::chrono::seconds kCollectiveTimeout(120);

// ||out - mean|| / ||mean|| over all tensors, `sum` holding the workers' sends added up.
double relativeError(const std::vector<at::Tensor>& out, const reducers::TensorBuffer& sum, int workers) {
  double difference = 0, reference = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const auto mean = sum.slice(i).view(out[i].sizes()).to(at::kDouble) / workers;
    difference += (out[i].to(at::kDouble) - mean).pow(2).sum().item<double>();
    reference += mean.pow(2).sum().item<double>();
  }
  return reference > 0 ? std::sqrt(difference / reference) : 0.0;
}

// A row's identity: the shapes, the reducer and the granularity it runs at (layer, with a note,
// when it does not accept the one asked for).
ReducerBenchmarkRow rowFor(const ShapeSet& set, const std::string& name, int workers, const reducers::ReducerSpec& spec,
                           ReducerOptions& reducer_options) {
  ReducerBenchmarkRow row;
  row.shapes = set.name;
  row.reducer = name;
  row.collective = spec.collective ? collectiveName(*spec.collective) : "";
  row.workers = workers;
  const auto& accepted = spec.granularities;
  if (std::find(accepted.begin(), accepted.end(), reducer_options.granularity) == accepted.end()) {
    row.note = "does not accept granularity " + nameOf(reducer_options.granularity);
    reducer_options.granularity = Granularity::layer;
  }
  row.granularity = nameOf(reducer_options.granularity);
  return row;
}

// What the timed repeats measured: each rank's seconds per repeat, rank 0's errors and bits.
struct Measured {
  std::vector<std::vector<double>> seconds;
  std::vector<double> errors;
  uint64_t bits = 0;
};

// One rank's warm-up and timed repeats, each on fresh normal sends.
void measureRank(comm::Communicator& comm, const ShapeSet& set, const reducers::ReducerSpec& spec,
                 const ReducerOptions& reducer_options, const ReducerBenchmarkOptions& options, Measured& measured) {
  const int rank = comm.rank();
  auto reducer = reducers::withGranularity(
      spec.make(reducers::ReducerContext{comm, reducer_options, options.seed, set.parameters}), reducer_options);
  auto generator = at::detail::createCPUGenerator(options.seed + 1000003ull * (rank + 1));
  std::vector<at::Tensor> send, out, memory;
  for (const auto& parameter : set.parameters) {
    send.push_back(at::empty(parameter.shape));
    out.push_back(at::empty(parameter.shape));
    memory.push_back(at::empty(parameter.shape));
  }
  reducers::TensorBuffer sum(send);
  for (int step = 0; step < options.warmup + options.repeats; ++step) {
    for (auto& t : send) t.normal_(0, 1, generator);
    // The exact mean, for the error; send is the reducer's scratch space, so taken first.
    sum.pack(send);
    if (sum.numel() > 0) comm.allreduceSum(sum.flat());
    comm.barrier();
    const auto start = std::chrono::steady_clock::now();
    const uint64_t step_bits = reducer->reduce(send, out, memory);
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (step < options.warmup) continue;
    const int k = step - options.warmup;
    measured.seconds[rank][k] = elapsed;
    if (rank == 0) {
      measured.bits = step_bits;
      measured.errors[k] = relativeError(out, sum, comm.size());
    }
  }
}

int64_t elementsOf(const ShapeSet& set) {
  int64_t elements = 0;
  for (const auto& parameter : set.parameters) elements += c10::multiply_integers(parameter.shape);
  return elements;
}

ReducerBenchmarkRow benchmarkOne(const ShapeSet& set, const std::string& name, int workers,
                                 const ReducerBenchmarkOptions& options) {
  const auto& spec = reducers::reducerRegistry().at(name).factory;
  ReducerOptions reducer_options = options.reducer;
  reducer_options.name = name;
  auto row = rowFor(set, name, workers, spec, reducer_options);
  Measured measured{std::vector<std::vector<double>>(workers, std::vector<double>(options.repeats)),
                    std::vector<double>(options.repeats)};
  try {
    comm::runThreadGroup(workers, kCollectiveTimeout, [&](comm::Communicator& comm) {
      measureRank(comm, set, spec, reducer_options, options, measured);
    });
  } catch (const std::exception& e) {
    row.note = "failed: " + firstLine(e.what());
    return row;
  }
  // A step takes as long as its slowest worker.
  std::vector<double> slowest(options.repeats, 0.0);
  for (const auto& per_rank : measured.seconds) {
    for (int k = 0; k < options.repeats; ++k) slowest[k] = std::max(slowest[k], per_rank[k]);
  }
  row.seconds = outputs::median(slowest);
  row.bytes = measured.bits / 8;
  const double uncompressed = 4.0 * static_cast<double>(elementsOf(set));
  row.compression_ratio =
      row.bytes > 0 ? uncompressed / static_cast<double>(row.bytes) : std::numeric_limits<double>::infinity();
  double error_sum = 0;
  for (double e : measured.errors) error_sum += e;
  row.relative_error = error_sum / options.repeats;
  return row;
}

ShapeSet resnet18Shapes() {
  auto resnet = tasks::models::buildModel("resnet18", {3, 32, 10}, 0);
  return {"resnet18", reducers::parametersOf(*resnet)};
}

}  // namespace

std::vector<ShapeSet> paperShapeSets(std::vector<std::string>& notes) {
  std::vector<ShapeSet> sets = {resnet18Shapes()};
  if (!tasks::taskRegistry().contains("wikitext2")) {
    notes.push_back("lstm: skipped, no task named wikitext2 is registered");
    return sets;
  }
  const auto keys = configKeys();
  ExperimentConfig config;
  for (const char* assignment : {"task.name=wikitext2", "task.architecture=lstm", "task.synthetic=true"}) {
    hyperparams::applyAssignment(config, assignment, keys);
  }
  auto task = tasks::taskRegistry()
                  .at("wikitext2")
                  .factory.make(tasks::TaskContext{config.task, config.training.batch_size, 0, c10::Device(c10::kCPU)});
  sets.push_back({"lstm", reducers::parametersOf(task->model())});
  return sets;
}

std::vector<ReducerBenchmarkRow> benchmarkReducers(const std::vector<ShapeSet>& sets,
                                                   const ReducerBenchmarkOptions& options,
                                                   const std::function<void(const ReducerBenchmarkRow&)>& on_row) {
  std::vector<std::string> names = options.reducers;
  if (names.empty()) {
    for (const auto* entry : reducers::reducerRegistry().entries()) names.push_back(entry->name);
  }
  for (const auto& name : names) reducers::reducerRegistry().at(name);  // unknown: UserError, before any run
  std::vector<ReducerBenchmarkRow> rows;
  for (const auto& set : sets) {
    for (const auto& name : names) {
      for (int workers : options.world_sizes) {
        rows.push_back(benchmarkOne(set, name, workers, options));
        if (on_row) on_row(rows.back());
      }
    }
  }
  return rows;
}

double codecSecondsPerElement(const ReducerOptions& reducer, int repeats) {
  // A lossless reducer sends what exact sends, as exact does.
  if (reducers::reducerRegistry().at(reducer.name).factory.lossless) return 0;
  ReducerBenchmarkOptions options;
  options.reducers = {reducer.name, "exact"};
  options.world_sizes = {1};
  options.repeats = repeats;
  options.reducer = reducer;
  const auto set = resnet18Shapes();
  const auto rows = benchmarkReducers({set}, options);
  for (const auto& row : rows) {
    if (row.note.rfind("failed", 0) == 0) throw std::runtime_error("timing " + row.reducer + "'s codec: " + row.note);
  }
  return std::max(0.0, rows[0].seconds - rows[1].seconds) / static_cast<double>(elementsOf(set));
}

std::string formatBenchmarkHeader() {
  return fmt::format("{:<10} {:<14} {:>7} {:<10} {:<8} {:>10} {:>12} {:>9} {:>9}  {}\n", "model", "reducer", "workers",
                     "collective", "unit", "ms/step", "sent/step", "ratio", "rel.err", "note");
}

std::string formatBenchmarkRow(const ReducerBenchmarkRow& row) {
  const double mib = units::mibOfBits(8.0 * static_cast<double>(row.bytes));
  return fmt::format("{:<10} {:<14} {:>7} {:<10} {:<8} {:>10.2f} {:>8.3f} MiB {:>8.1f}x {:>9.4f}  {}\n", row.shapes,
                     row.reducer, row.workers, row.collective, row.granularity, 1000.0 * row.seconds, mib,
                     row.compression_ratio, row.relative_error, row.note);
}

std::string benchmarkJson(const std::vector<ReducerBenchmarkRow>& rows, const std::vector<std::string>& notes) {
  outputs::Json json{{"rows", outputs::Json::array()}, {"notes", notes}};
  for (const auto& r : rows) {
    json["rows"].push_back({{"model", r.shapes},
                            {"reducer", r.reducer},
                            {"collective", r.collective},
                            {"granularity", r.granularity},
                            {"workers", r.workers},
                            {"seconds", r.seconds},
                            {"bytes", r.bytes},
                            {"compression_ratio", r.compression_ratio},
                            {"relative_error", r.relative_error},
                            {"note", r.note}});
  }
  // One row per line.
  return outputs::jsonText(json, 2) + "\n";
}

}  // namespace gcrun::experiments
