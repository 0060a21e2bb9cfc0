#include "outputs/performance/step_model.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "outputs/performance/collective_cost.h"

namespace gcrun::performance {
namespace {

using Kind = StepItem::Kind;

// One worker's position in its program and its clock (microseconds from the step's start).
struct Replay {
  const StepProgram* program;
  size_t next = 0;
  double now_us = 0;
  double compute_us = 0;
  double codec_us = 0;
};

void checkSameCollectives(const std::vector<const StepProgram*>& programs) {
  for (const auto* program : programs) {
    if (!sameCollectives(*program, *programs.front())) {
      throw std::invalid_argument("step " + std::to_string(program->step) +
                                  ": the workers' traces do not hold the same collectives");
    }
  }
}

// When each collective finished; unset ones have not yet.
struct Finished {
  std::vector<double> done_us;
  std::vector<char> finished;
};

// Runs the worker's compute and waits until it reaches collective `c`'s issue or call (or, with c
// past the last one, its program's end); returns whether that item is a blocking call.
bool advance(Replay& r, size_t c, const Finished& collectives, const ComputeScale& scale) {
  const auto& items = r.program->items;
  for (; r.next < items.size(); ++r.next) {
    const auto& item = items[r.next];
    if (item.kind == Kind::compute) {
      const bool codec = item.part == StepItem::Part::codec;
      const double us = item.us * (codec ? scale.codec : scale.compute);
      r.now_us += us;
      (codec ? r.codec_us : r.compute_us) += us;
    } else if (item.kind == Kind::wait) {
      if (collectives.finished[item.collective]) r.now_us = std::max(r.now_us, collectives.done_us[item.collective]);
    } else if (item.collective == c) {
      return item.kind == Kind::call;
    }
  }
  return false;
}

// The step ends with the last worker; its split is the busiest worker's (the most compute and
// codec): the others' time in the exchange holds their wait for it, and the last to finish need not
// be the one that computed longest.
StepPrediction predictionOf(const Replay& last, const Replay& busiest) {
  StepPrediction prediction;
  prediction.total_ms = last.now_us / 1000;
  prediction.compute_ms = busiest.compute_us / 1000;
  prediction.codec_ms = busiest.codec_us / 1000;
  prediction.exposed_comm_ms = std::max(0.0, prediction.total_ms - prediction.compute_ms - prediction.codec_ms);
  return prediction;
}

}  // namespace

StepPrediction predictStep(const std::vector<const StepProgram*>& programs, int workers,
                           const network::NetworkProfile& profile, const ComputeScale& scale) {
  if (programs.empty() || workers < 1) throw std::invalid_argument("predictStep: no programs or workers");
  checkSameCollectives(programs);
  const auto& collectives = programs.front()->collectives;
  // Worker w replays programs[w mod n]: workers with the same program keep the same clock, so one
  // replay of each distinct program stands for all of them.
  std::vector<Replay> replays;
  const size_t distinct = std::min(programs.size(), static_cast<size_t>(workers));
  for (size_t w = 0; w < distinct; ++w) replays.push_back({programs[w]});
  Finished finished{std::vector<double>(collectives.size(), 0), std::vector<char>(collectives.size(), 0)};

  double network_free_us = 0;
  for (size_t c = 0; c < collectives.size(); ++c) {
    double start_us = network_free_us;
    std::vector<Replay*> blocked;
    for (auto& r : replays) {
      if (advance(r, c, finished, scale)) blocked.push_back(&r);
      start_us = std::max(start_us, r.now_us);
    }
    const auto& op = collectives[c];
    const double seconds = collectiveSeconds(profile, op.kindAt(workers), op.bytes, workers, op.dtype);
    const double done_us = start_us + 1e6 * seconds;
    finished.done_us[c] = done_us;
    finished.finished[c] = 1;
    network_free_us = done_us;
    for (auto& r : replays) {
      const auto& items = r.program->items;
      if (r.next < items.size() && items[r.next].kind != Kind::compute && items[r.next].collective == c) ++r.next;
    }
    for (auto* r : blocked) r->now_us = std::max(r->now_us, done_us);
  }
  const Replay* last = nullptr;
  const Replay* busiest = nullptr;
  for (auto& r : replays) {
    advance(r, collectives.size(), finished, scale);
    if (!last || r.now_us > last->now_us) last = &r;
    if (!busiest || r.compute_us + r.codec_us > busiest->compute_us + busiest->codec_us) busiest = &r;
  }
  return predictionOf(*last, *busiest);
}

}  // namespace gcrun::performance
