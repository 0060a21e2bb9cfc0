#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hyperparams/base/collective.h"

namespace gcrun::trace {

// What one logical worker did during the traced steps, as the step model reads it back from a
// trace-rank<r>.json file (trace_file.h). Times are microseconds since the process's trace origin.

// A phase of a step, or an evaluation. Names: "batch" (the whole step, as the `batch` timer times
// it), "forward", "backward", "reduce" (after backward: finishing the sends and reducer.reduce()),
// "codec" (inside "reduce": the reducer's own compute between its collective calls, i.e. encode
// and decode), "optimizer" (weight decay, momentum and the step after the reduce), "evaluation".
struct Span {
  std::string name;
  int64_t step = 0;  // 1-based step the span belongs to (an evaluation: the step it follows)
  double start_us = 0;
  double duration_us = 0;
  double end_us() const { return start_us + duration_us; }
};

// One collective the worker took part in. bytes: this worker's tensor (for all-gather its own
// message, not the result); dtype: its elements.
// A blocking call is issued, waited for and done in one call (wait_us == issued_us); an async
// all-reduce is issued during backward and waited for in the reduce.
struct Collective {
  CollectiveKind kind = CollectiveKind::all_reduce;
  uint64_t bytes = 0;
  int group_size = 1;
  int64_t step = 0;
  bool async = false;
  double issued_us = 0;
  double wait_us = 0;                  // when the worker began to wait for it
  double done_us = 0;                  // when the wait returned
  DataType dtype = DataType::float32;  // the tensor's elements (a barrier: float32)
  // Run by another thread of the worker over a second group (streaming-diloco's exchange), from
  // its issue to its end while the worker's steps went on; its step is the one the worker was in
  // when it was issued.
  bool background = false;
};

struct WorkerTimeline {
  int worker = 0;  // the global (logical) rank
  std::vector<Span> spans;
  std::vector<Collective> collectives;  // in issue order
};

// Everything one trace file holds.
struct ProcessTimeline {
  int rank = 0;        // the process's rank
  int world_size = 1;  // logical workers in the whole run
  std::string reducer;
  // The reducer's messages sum (its ReducerSpec::collective is all-reduce): an all-gather of
  // them between 2 workers is a swap that stands in for the sum (fp16 does so), an all-reduce at
  // other worker counts.
  bool summable = false;
  std::string backend;
  bool truncated = false;  // the size bound cut recording short
  std::vector<WorkerTimeline> workers;
};

}  // namespace gcrun::trace
