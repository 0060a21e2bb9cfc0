#pragma once

#include <memory>

#include "reducers/reducer.h"

namespace gcrun::reducers {

// The factories reducerRegistry() registers on first use.
std::unique_ptr<Reducer> makeExactReducer(const ReducerContext& context);
std::unique_ptr<Reducer> makePowerSgdReducer(const ReducerContext& context);
std::unique_ptr<Reducer> makeUnbiasedRankReducer(const ReducerContext& context);
std::unique_ptr<Reducer> makeSvdReducer(const ReducerContext& context);
std::unique_ptr<Reducer> makeAtomoReducer(const ReducerContext& context);
std::unique_ptr<Reducer> makeSignumReducer(const ReducerContext& context);
std::unique_ptr<Reducer> makeSignNormReducer(const ReducerContext& context);
std::unique_ptr<Reducer> makeTopKReducer(const ReducerContext& context);
std::unique_ptr<Reducer> makeGlobalTopKReducer(const ReducerContext& context);
std::unique_ptr<Reducer> makeRandomKReducer(const ReducerContext& context);
std::unique_ptr<Reducer> makeRandomBlockReducer(const ReducerContext& context);
std::unique_ptr<Reducer> makeQsgdReducer(const ReducerContext& context);
std::unique_ptr<Reducer> makeTernGradReducer(const ReducerContext& context);
std::unique_ptr<Reducer> makeFp16Reducer(const ReducerContext& context);
std::unique_ptr<Reducer> makeBf16Reducer(const ReducerContext& context);

}  // namespace gcrun::reducers
