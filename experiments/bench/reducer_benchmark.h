#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hyperparams/config.h"
#include "reducers/reducer.h"

namespace gcrun::experiments {

// The gradient shapes of one model: its parameters in registration order, with their names.
struct ShapeSet {
  std::string name;
  std::vector<reducers::ParameterInfo> parameters;
};

// The paper's models: ResNet-18 on CIFAR-10 and, when the wikitext2 task is registered, its LSTM
// (built on synthetic data). `notes` gets a line for each model left out and why.
std::vector<ShapeSet> paperShapeSets(std::vector<std::string>& notes);

struct ReducerBenchmarkOptions {
  std::vector<std::string> reducers;  // empty: every registered reducer
  std::vector<int> world_sizes = {1, 2};
  int warmup = 1;   // untimed steps first (allocation, warm start)
  int repeats = 1;  // timed steps
  // The reducer.* settings every reducer gets (its name is set per row). A reducer that does not
  // accept the granularity runs at layer granularity instead, and says so in its row's note.
  ReducerOptions reducer;
  uint64_t seed = 42;
};

// One reducer on one shape set with one number of workers. Every step reduces fresh N(0, 1)
// gradients, a different draw on each worker, without error feedback (memory is not fed back), so
// the error is the compressor's own on that step.
struct ReducerBenchmarkRow {
  std::string shapes;
  std::string reducer;
  std::string collective;
  std::string granularity;  // the one it ran at
  int workers = 1;
  double seconds = 0;            // reduce() wall time (compress, communicate, decompress): the
                                 // median over steps of the slowest worker's
  uint64_t bytes = 0;            // what one worker sent in one step (reduce()'s bits / 8)
  double compression_ratio = 0;  // float32 gradient bytes / bytes
  double relative_error = 0;     // ||out - mean(send)|| / ||mean(send)||, mean over timed steps
  std::string note;              // why it ran at other settings, or why it failed
};

// Runs every reducer on every shape set at every world size (threads over a Gloo group in this
// process), calling on_row as each row is done. An unknown reducer name is a UserError before any
// run; a reducer that throws gets a row with the error in its note, and the others still run.
std::vector<ReducerBenchmarkRow> benchmarkReducers(const std::vector<ShapeSet>& sets,
                                                   const ReducerBenchmarkOptions& options,
                                                   const std::function<void(const ReducerBenchmarkRow&)>& on_row = {});

// A reducer's encode and decode time per gradient element on this machine, for `gcrun plan`: one
// worker's reduce() of ResNet-18's gradient shapes (11.2M elements) less the exact reducer's (the
// collective's own copy), over the elements; 0 where it is not slower. The median of `repeats`
// steps after one warm-up. Per element is a simplification: a low-rank codec's cost also grows
// with its rank and its matrices' sides. A reducer that fails to run is a runtime error.
double codecSecondsPerElement(const ReducerOptions& reducer, int repeats = 3);

// A fixed-width table: the header line, then one line per row.
std::string formatBenchmarkHeader();
std::string formatBenchmarkRow(const ReducerBenchmarkRow& row);
// {"rows": [{...}], "notes": [...]}
std::string benchmarkJson(const std::vector<ReducerBenchmarkRow>& rows, const std::vector<std::string>& notes);

}  // namespace gcrun::experiments
