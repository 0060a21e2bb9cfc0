#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "experiments/sync/synchronizer.h"

namespace gcrun::experiments {

// Streaming DiLoCo (Douillard et al., arXiv 2501.18512), sync.strategy streaming-diloco: DiLoCo
// whose model is split into F fragments (sync.fragments) strided over the layers, each synced once
// every H steps (sync.every) at a step of its own, so that a sync sends about 1/F of the model.
// A fragment's send is diloco's for its parameters only (GlobalSlice, global_slice.h): Δ = θ_g − θ
// through a reducer of its own (SyncContext::make_reducer; reducers keep per-tensor state by
// position), with error feedback carried from sync to sync when optimizer.memory is on. The
// averaged Δ waits τ steps (sync.delay); then the outer SGD (outer_sgd.h, one per fragment) updates
// θ_g's fragment and the worker's fragment becomes α·θ + (1 − α)·θ_g (sync.mix_alpha). With F = 1,
// τ = 0 and α = 0 it is diloco, step for step: both are a GlobalModelSync whose sync is a GlobalSlice's.
// At τ >= 1 the exchange runs in the background (BackgroundExchange, a thread of the strategy's
// own) over a second group (Communicator::sibling, its reducers made by
// SyncContext::make_reducer_over) from the sending step until its result is applied, from buffers
// of the fragment's own: the same snapshot and the same step of application as a blocking
// exchange, so the same models bit for bit. A fragment's first exchange in a process blocks, to
// learn the bits its sending steps report; so do all at τ = 0 and without a second group.
// The strategy does not use SyncContext::reducer: every fragment reduces through its own.
// Checkpoint entries: streaming-diloco/global/<parameter>, and per fragment p under
// streaming-diloco/fragment<p>/: memory/<parameter>, reducer/<entry>, momentum/<parameter>,
// outer_steps, in_flight/<parameter> (the averaged Δ not yet applied) and applies_at (its step;
// -1: none).
// Refuses, with a UserError when built, more fragments than the model has modules or than H, and
// τ >= H / F (a fragment's result must land before its next send); the last two also when the
// experiment is resolved (SynchronizerSpec::validate).

// The parameters' fragments, each a list of indices in parameter order: a parameter's module is
// its name up to the last '.', modules are numbered in the order of their first parameter, and
// module j goes to fragment j mod `fragments`. Throws UserError when the model has fewer modules
// than `fragments`.
std::vector<std::vector<size_t>> streamingFragments(const std::vector<std::string>& names, int64_t fragments);

// The fragment that sends after step `step` (1-based), if one does: p when
// step % every == ((p + 1) · every / fragments) % every, so the last one sends at multiples of
// `every` and the others are staggered through the period. Needs fragments <= every.
std::optional<size_t> streamingSender(int64_t step, int64_t every, int64_t fragments);

}  // namespace gcrun::experiments
