#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gcrun {

// What the report and gcrun predict compare every other reducer with: the full-precision average
// (compression and speedup "vs exact", the report's finding) and the half-precision one ("vs
// fp16"). A reducer declares it in its registry entry (reducers::ReducerSpec::baseline), a run
// records it in run.json's "baseline", and the report and the predictor read it there.
enum class Baseline { none, full_precision, half_precision };

// "none", "full-precision", "half-precision": run.json's text.
std::string baselineName(Baseline baseline);
// The baseline `name` spells; nothing for any other text.
std::optional<Baseline> baselineOf(std::string_view name);

}  // namespace gcrun
