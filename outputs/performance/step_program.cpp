#include "outputs/performance/step_program.h"

#include <algorithm>
#include <map>
#include <optional>

namespace gcrun::performance {
namespace {

using trace::Span;

// The phases of one step, by name.
struct StepSpans {
  std::optional<Span> batch, forward, backward, reduce, optimizer, sync;
};

std::map<int64_t, StepSpans> spansByStep(const trace::WorkerTimeline& worker) {
  std::map<int64_t, StepSpans> steps;
  for (const auto& span : worker.spans) {
    auto& s = steps[span.step];
    if (span.name == "batch") s.batch = span;
    if (span.name == "forward") s.forward = span;
    if (span.name == "backward") s.backward = span;
    if (span.name == "reduce") s.reduce = span;
    if (span.name == "optimizer") s.optimizer = span;
    if (span.name == "sync") s.sync = span;
  }
  return steps;
}

// Each step's collectives, in issue order: a step's program looks at its own alone, so that
// building every program is linear in the trace however its steps' windows overlap.
std::map<int64_t, std::vector<const trace::Collective*>> collectivesByStep(const trace::WorkerTimeline& worker) {
  std::map<int64_t, std::vector<const trace::Collective*>> steps;
  for (const auto& c : worker.collectives) steps[c.step].push_back(&c);
  return steps;
}

// A point where the worker's timeline meets a collective; `idle`: where it waited for a background
// collective of another step's (its time is neither compute nor this step's collective).
struct Mark {
  double start_us, end_us;  // end: when the worker goes on
  StepItem::Kind kind;
  size_t collective;
  bool idle = false;
};

// The background collectives (trace::Collective::background), by when they were done.
std::vector<const trace::Collective*> backgroundByEnd(const trace::WorkerTimeline& worker) {
  std::vector<const trace::Collective*> background;
  for (const auto& c : worker.collectives) {
    if (c.background) background.push_back(&c);
  }
  std::sort(background.begin(), background.end(),
            [](const trace::Collective* a, const trace::Collective* b) { return a->done_us < b->done_us; });
  return background;
}

// A step's sync waits for the background exchange that ends within it: from the later of the
// span's start and the exchange's issue to its end the worker is idle.
void addIdleMarks(const std::vector<const trace::Collective*>& background, const StepSpans& spans, int64_t step,
                  std::vector<Mark>& marks) {
  if (!spans.sync) return;
  const double start = spans.sync->start_us, end = spans.sync->end_us();
  auto c = std::lower_bound(background.begin(), background.end(), start,
                            [](const trace::Collective* x, double t) { return x->done_us < t; });
  for (; c != background.end() && (*c)->done_us <= end; ++c) {
    if ((*c)->step != step)
      marks.push_back({std::max(start, (*c)->issued_us), (*c)->done_us, StepItem::Kind::wait, 0, true});
  }
}

class Builder {
 public:
  Builder(const StepSpans& spans, bool between_spans) : spans_(spans), between_spans_(between_spans) {}

  // The worker's time from `from` to `to`, split at the spans' edges, each piece charged to the part
  // its span stands for.
  void computeBetween(double from, double to, std::vector<StepItem>& items) const {
    std::vector<double> edges = {from, to};
    for (const auto* span : {&spans_.forward, &spans_.backward, &spans_.reduce, &spans_.optimizer, &spans_.sync}) {
      if (!*span) continue;
      for (const double edge : {(*span)->start_us, (*span)->end_us()}) {
        if (edge > from && edge < to) edges.push_back(edge);
      }
    }
    std::sort(edges.begin(), edges.end());
    for (size_t k = 0; k + 1 < edges.size(); ++k) {
      const double middle = (edges[k] + edges[k + 1]) / 2;
      const double us = edges[k + 1] - edges[k];
      if (us <= 0) continue;
      const bool exchange = inside(spans_.reduce, middle) || inside(spans_.sync, middle);
      const auto part = exchange ? StepItem::Part::codec : StepItem::Part::compute;
      const bool in_span = part == StepItem::Part::codec || inside(spans_.forward, middle) ||
                           inside(spans_.backward, middle) || inside(spans_.optimizer, middle);
      if (!in_span && !between_spans_) continue;
      if (!items.empty() && items.back().kind == StepItem::Kind::compute && items.back().part == part) {
        items.back().us += us;
      } else {
        items.push_back({StepItem::Kind::compute, part, us, 0});
      }
    }
  }

 private:
  static bool inside(const std::optional<Span>& span, double t) {
    return span && t >= span->start_us && t <= span->end_us();
  }
  const StepSpans& spans_;
  bool between_spans_;
};

}  // namespace

double StepProgram::compute_us() const {
  double total = 0;
  for (const auto& item : items) {
    if (item.kind == StepItem::Kind::compute) total += item.us;
  }
  return total;
}

bool sameCollectives(const StepProgram& a, const StepProgram& b) {
  return std::equal(a.collectives.begin(), a.collectives.end(), b.collectives.begin(), b.collectives.end(),
                    [](const CollectiveOp& x, const CollectiveOp& y) {
                      return x.kind == y.kind && x.bytes == y.bytes && x.dtype == y.dtype;
                    });
}

OptimizerTimes optimizerTimes(const trace::WorkerTimeline& worker) {
  OptimizerTimes times;
  for (const auto& span : worker.spans) {
    if (span.name == "optimizer") times.emplace(span.step, span.duration_us);
  }
  return times;
}

std::vector<StepProgram> stepPrograms(const trace::WorkerTimeline& worker, bool between_spans, bool summable,
                                      const OptimizerTimes* shared_optimizer_us) {
  static const std::vector<const trace::Collective*> kNone;
  const auto collectives = collectivesByStep(worker);
  const auto background = backgroundByEnd(worker);
  std::vector<StepProgram> programs;
  for (auto [step, spans] : spansByStep(worker)) {
    if (shared_optimizer_us) spans.optimizer.reset();
    if (!spans.batch || !spans.forward || !spans.backward || !spans.reduce) continue;
    const double begin = spans.forward->start_us;
    const double end = spans.batch->end_us();
    StepProgram program;
    program.step = step;
    std::vector<Mark> marks;
    const auto own = collectives.find(step);
    for (const auto* collective : own == collectives.end() ? kNone : own->second) {
      const auto& c = *collective;
      if (c.kind == CollectiveKind::barrier) continue;
      if (!c.background && (c.issued_us < begin || c.done_us > end)) continue;
      const size_t index = program.collectives.size();
      const bool swap = summable && c.kind == CollectiveKind::all_gather && c.group_size == 2;
      program.collectives.push_back({c.kind, double(c.bytes), swap, c.dtype, c.background});
      if (c.background) {
        // The step started it and went on; replayed as a call the step waits for, the blocking
        // exchange that the time model then hides behind the steps until its use.
        const double at = std::clamp(c.issued_us, begin, end);
        marks.push_back({at, at, StepItem::Kind::call, index});
      } else if (c.async) {
        marks.push_back({c.issued_us, c.issued_us, StepItem::Kind::issue, index});
        marks.push_back({c.wait_us, c.done_us, StepItem::Kind::wait, index});
      } else {
        marks.push_back({c.issued_us, c.done_us, StepItem::Kind::call, index});
      }
    }
    addIdleMarks(background, spans, step, marks);
    std::stable_sort(marks.begin(), marks.end(), [](const Mark& a, const Mark& b) { return a.start_us < b.start_us; });
    const Builder builder(spans, between_spans);
    double cursor = begin;
    for (const auto& mark : marks) {
      builder.computeBetween(cursor, std::max(cursor, mark.start_us), program.items);
      if (!mark.idle) program.items.push_back({mark.kind, StepItem::Part::compute, 0, mark.collective});
      cursor = std::max(cursor, mark.end_us);
    }
    builder.computeBetween(cursor, end, program.items);
    if (shared_optimizer_us) {
      const auto found = shared_optimizer_us->find(step);
      if (found != shared_optimizer_us->end()) {
        program.items.push_back({StepItem::Kind::compute, StepItem::Part::compute, found->second, 0});
      }
    }
    programs.push_back(std::move(program));
  }
  return programs;
}

}  // namespace gcrun::performance
