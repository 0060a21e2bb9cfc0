#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <c10/util/accumulate.h>

#include "reducers/reducer.h"

namespace gcrun::reducers {

// Each built-in reducer's spec: its factory, collective, settings and rules, defined next to its
// code; reducerRegistry() registers them on first use.
ReducerSpec exactSpec();
ReducerSpec powerSgdSpec();
ReducerSpec powerSgdDdpSpec();
ReducerSpec unbiasedRankSpec();
ReducerSpec svdSpec();
ReducerSpec atomoSpec();
ReducerSpec signumSpec();
ReducerSpec signNormSpec();
ReducerSpec topKSpec();
ReducerSpec globalTopKSpec();
ReducerSpec randomKSpec();
ReducerSpec randomBlockSpec();
ReducerSpec qsgdSpec();
ReducerSpec ternGradSpec();
ReducerSpec fp16Spec();
ReducerSpec bf16Spec();
ReducerSpec twoBitTopKSpec();
ReducerSpec dctTopKSpec();
ReducerSpec fp8Spec();
ReducerSpec fp4Spec();
ReducerSpec int8Spec();

// What one worker's reduce() sends per call, in bits, for float32 tensors of `shapes` (layer
// granularity, after any warm-up such as powersgd's start_iter), worked out by the code that
// counts the reducer's messages (its lastCosts()); `gcrun plan` asks through plannedBits().
inline uint64_t elementCount(const std::vector<int64_t>& shape) {
  return static_cast<uint64_t>(c10::multiply_integers(shape));
}
uint64_t exactPlannedBits(const ReducerOptions& options, const TensorShapes& shapes);
uint64_t powerSgdPlannedBits(const ReducerOptions& options, const TensorShapes& shapes);
uint64_t fp16PlannedBits(const ReducerOptions& options, const TensorShapes& shapes);
uint64_t bf16PlannedBits(const ReducerOptions& options, const TensorShapes& shapes);
uint64_t fp8PlannedBits(const ReducerOptions& options, const TensorShapes& shapes);
uint64_t fp4PlannedBits(const ReducerOptions& options, const TensorShapes& shapes);
uint64_t int8PlannedBits(const ReducerOptions& options, const TensorShapes& shapes);

// The plain all-reduce average; PowerSGD also uses it for its first reducer.start_iter steps.
std::unique_ptr<Reducer> makeExactReducer(const ReducerContext& context);

}  // namespace gcrun::reducers
