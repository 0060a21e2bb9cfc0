#pragma once

#include <cstdint>
#include <string>

namespace gcrun {

// The largest H a schedule may have (sync.every, run.json's schedule.every, predict's --sync-every).
inline constexpr int64_t kMaxSyncEvery = 1000000;

// When a sync strategy's workers exchange, as the strategy declares it from its settings
// (SynchronizerSpec::schedule): which steps send, what each send holds, and when it is applied.
// Rank 0 records it in run.json's "schedule"; `gcrun predict` models a run's time per step from it.
struct SyncSchedule {
  std::string strategy = "every-step";  // the sync.strategy that declared it
  // Which steps send. true: the workers' models every `every` steps, the steps between sending
  // nothing; false: every step exchanges (its gradient, or a payload made of it).
  bool periodic = false;
  int64_t every = 1;  // H, from 1 to kMaxSyncEvery; 1 when not periodic
  // What a send holds: the whole model (1), or fragment p of F, at steps of its own (sendOffset).
  int64_t fragments = 1;
  // When a send is applied: `delay` (tau) steps after it, from 0 to H.
  int64_t delay = 0;
  // The schedule lets a send run behind the following steps' compute until it is applied (gcrun's
  // own sends block; predict shows the time per step if they did not).
  bool overlapped = false;
  int64_t warmup_steps = 0;  // first steps that exchange every step's gradient before the schedule

  bool operator==(const SyncSchedule& other) const;
};

// Every step exchanges its gradient, whole: every-step's schedule, and a run's before strategies.
SyncSchedule everyStepSchedule(const std::string& strategy = "every-step");

// The workers' whole models every `every` steps: local-sgd's, diloco's and their kin's.
SyncSchedule periodicSchedule(const std::string& strategy, int64_t every);

// The one send-step formula: fragment p of F is sent after the steps t with
//   t mod H = ((p + 1) H / F) mod H,
// so F fragments send at steps spaced H/F apart and the last at the period's end (F = 1: every
// H-th step). Needs 0 <= p < F <= H.
int64_t sendOffset(int64_t fragment, int64_t fragments, int64_t every);

// What is wrong with a schedule read from elsewhere (run.json): "every is 0; expected ..." naming
// the field and what is accepted, or "" when it is one gcrun could have declared.
std::string scheduleProblem(const SyncSchedule& schedule);

}  // namespace gcrun
