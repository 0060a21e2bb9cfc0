#pragma once

#include "hyperparams/base/sync_schedule.h"
#include "outputs/report/run_data.h"

namespace gcrun::performance {

// When a run's workers exchanged: the schedule its strategy declared and rank 0 recorded in
// run.json ("schedule"), else, for a run from before schedules were recorded, scheduleOfAnOldRun.
// run.json is data: a recorded schedule that is no schedule is a UserError naming the file and
// the field.
SyncSchedule syncScheduleOf(const outputs::RunData& run);

// THE FALLBACK, and the one place outside experiments/ that reads a strategy's settings: the
// schedule of a run whose run.json records none, from its config.yaml as gcrun's built-in
// strategies then read it. A strategy with a sync.every key syncs models every that many steps
// (sync.fragments of them, sync.delay steps late, after sync.warmup_steps of every-step; a
// streaming-diloco's sends could overlap); the others exchange every step. A run from before
// strategies existed is every-step. config.yaml is data: an unknown strategy or a value out of
// range (sync.every from 1 to kMaxSyncEvery, sync.fragments and sync.delay up to sync.every) is a
// UserError naming the file and key.
SyncSchedule scheduleOfAnOldRun(const outputs::RunData& run);

}  // namespace gcrun::performance
