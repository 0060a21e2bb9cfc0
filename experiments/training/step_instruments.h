#pragma once

#include <optional>

#include "outputs/timer.h"
#include "outputs/trace/recorder.h"

namespace gcrun::experiments {

// The phases of a training step and of an epoch's end. Each is named once, in step_instruments.cpp:
// its timer label (timer_summary.json) and its trace span (output.trace), either of which may be
// absent; the names are those files' formats.
enum class Phase {
  batch,
  forward,
  backward,
  reduce,
  optimizer,
  weight_decay,
  momentum,
  optimizer_step,
  sync,  // a strategy's sync of models after the optimizer (traced only)
  layer_stats,
  evaluation
};

// One worker's step instrumentation: the timer and the trace, which measure the same phases.
class StepInstruments {
 public:
  StepInstruments(outputs::Timer& timer, trace::WorkerTrace& trace) : timer_(timer), trace_(trace) {}

  // A phase from its construction to its end, timed and traced as its names say; `when` false:
  // it is not traced (an epoch's end without an evaluation still times its metrics).
  class Scope {
   public:
    Scope(outputs::Timer& timer, trace::WorkerTrace& trace, Phase phase, bool when);

   private:
    std::optional<outputs::Timer::Scope> timed_;
    trace::WorkerTrace::Span traced_;
  };

  Scope phase(Phase phase, bool when = true) { return Scope(timer_, trace_, phase, when); }
  // What is recorded from now on belongs to `step` (1-based; an evaluation: the step it follows).
  void setStep(int64_t step) { trace_.setStep(step); }

 private:
  outputs::Timer& timer_;
  trace::WorkerTrace& trace_;
};

}  // namespace gcrun::experiments
