#pragma once

#include <memory>

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

// The plain all-reduce average; PowerSGD also uses it for its first reducer.start_iter steps.
std::unique_ptr<Reducer> makeExactReducer(const ReducerContext& context);

}  // namespace gcrun::reducers
