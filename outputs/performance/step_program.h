#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "outputs/network/network_profile.h"
#include "outputs/trace/timeline.h"

namespace gcrun::performance {

// One worker's traced step as the model replays it: what it computed, in order, and where it
// issued, called and waited for its collectives. The network's share of the measured times (the
// blocked parts of calls and waits) is left out; the model puts its own in their place.
struct StepItem {
  enum class Kind {
    compute,  // `us` of this worker's own work
    issue,    // starts collective `collective` without waiting (an all-reduce during backward)
    call,     // a blocking collective: starts it and waits for it
    wait,     // waits for a collective issued earlier
  };
  // codec: the exchange's own compute: inside the reduce (the reducer's encode and decode) and
  // inside a strategy's sync (pseudo-gradients, the outer step, its codec).
  enum class Part { compute, codec };
  Kind kind = Kind::compute;
  Part part = Part::compute;
  double us = 0;
  size_t collective = 0;  // index into StepProgram::collectives
};

struct CollectiveOp {
  CollectiveKind kind = CollectiveKind::all_reduce;
  double bytes = 0;  // per worker
  // An all-gather of summable messages between 2 workers (ProcessTimeline::summable): costed as
  // traced at 2 workers, as an all-reduce of the same bytes and dtype at any other count.
  bool stands_for_sum = false;
  DataType dtype = DataType::float32;  // the elements, as traced: a reduction's cost depends on it
  // Ran in the background (trace::Collective::background): replayed as a call at the step that
  // started it, and hidden behind the steps until its use by the overlapped schedule (replay.h).
  bool background = false;
  CollectiveKind kindAt(int workers) const {
    return stands_for_sum && workers != 2 ? CollectiveKind::all_reduce : kind;
  }
};

struct StepProgram {
  int64_t step = 0;
  std::vector<StepItem> items;
  std::vector<CollectiveOp> collectives;  // in issue order
  double compute_us() const;              // the items' compute, codec included
};

// Whether two workers' programs of a step hold the same collectives (kinds, sizes and dtypes, in
// order).
bool sameCollectives(const StepProgram& a, const StepProgram& b);

// Each step's optimizer time (microseconds), by step.
using OptimizerTimes = std::map<int64_t, double>;

// The worker's traced steps that have a batch, forward, backward and reduce span, in step order.
// From the forward's start to the batch's end, with the step's own collectives
// (trace::Collective::step) alone, so that building the programs of a trace takes time and memory
// linear in its events; collectives outside the batch (the loss window's all-reduce, the stop
// flag) are not part of it.
// `between_spans`: whether time in the batch outside the named spans counts as compute (a worker
// alone in its process: loss.item(), the finiteness checks), or is left out (a simulated worker,
// which spends it waiting for its turn). With `shared_optimizer_us` (simulated workers, whose
// update worker 0 applies while the others wait for it in their "optimizer" span), each step's
// optimizer time is the one given for it instead of the worker's own span.
std::vector<StepProgram> stepPrograms(const trace::WorkerTimeline& worker, bool between_spans, bool summable,
                                      const OptimizerTimes* shared_optimizer_us = nullptr);

// Each step's optimizer time in `worker`'s timeline, for stepPrograms's shared_optimizer_us.
OptimizerTimes optimizerTimes(const trace::WorkerTimeline& worker);

}  // namespace gcrun::performance
