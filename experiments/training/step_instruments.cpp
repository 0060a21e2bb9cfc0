#include "experiments/training/step_instruments.h"

namespace gcrun::experiments {
namespace {

// Each phase's names, null where it has none: the vocabulary of timer_summary.json and the trace.
struct PhaseNames {
  const char* timer_label;
  const char* span;
};

PhaseNames namesOf(Phase phase) {
  switch (phase) {
    case Phase::batch:
      return {"batch", "batch"};
    case Phase::forward:
      return {"batch.forward", "forward"};
    case Phase::backward:
      return {"batch.backward", "backward"};
    case Phase::reduce:
      return {"batch.reduce", "reduce"};
    case Phase::optimizer:
      return {nullptr, "optimizer"};
    case Phase::weight_decay:
      return {"batch.wd", nullptr};
    case Phase::momentum:
      return {"batch.mom", nullptr};
    case Phase::optimizer_step:
      return {"batch.step", nullptr};
    case Phase::sync:
      return {nullptr, "sync"};
    case Phase::layer_stats:
      return {"layer_stats", nullptr};
    case Phase::evaluation:
      return {nullptr, "evaluation"};
  }
  return {nullptr, nullptr};
}

std::optional<outputs::Timer::Scope> timedIfNamed(outputs::Timer& timer, const char* label) {
  if (label == nullptr) return std::nullopt;
  return std::optional<outputs::Timer::Scope>(std::in_place, timer, label);
}

// The reduce span is the trace's own: it turns the reducer's time outside collectives into codec spans.
trace::WorkerTrace::Span tracedIfNamed(trace::WorkerTrace& trace, Phase phase, const char* span, bool when) {
  if (phase == Phase::reduce) return trace.reduce();
  return trace.span(span, when && span != nullptr);
}

}  // namespace

StepInstruments::Scope::Scope(outputs::Timer& timer, trace::WorkerTrace& trace, Phase phase, bool when)
    : timed_(timedIfNamed(timer, namesOf(phase).timer_label)),
      traced_(tracedIfNamed(trace, phase, namesOf(phase).span, when)) {}

}  // namespace gcrun::experiments
