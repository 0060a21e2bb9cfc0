#pragma once

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "experiments/sync/synchronizer.h"
#include "hyperparams/base/tensor_map.h"
#include "reducers/reducer.h"

namespace gcrun::experiments {

// The checkpoint entries of a strategy that sends through the reducer: <prefix>memory/<parameter>
// (its error feedback, one per parameter) and <prefix>reducer/<entry> (the reducer's own state). A
// strategy with one reducer per group of parameters gives each group a prefix of its own.
void saveReducerState(TensorMap& state, const std::vector<std::string>& names, const std::vector<at::Tensor>& memories,
                      const reducers::Reducer& reducer, const std::string& prefix = "");
// Copies them back; a reducer entry it refuses is a UserError.
void loadReducerState(const TensorMap& state, const std::vector<std::string>& names,
                      const std::vector<at::Tensor>& memories, reducers::Reducer& reducer,
                      const std::string& prefix = "");
// Only the reducer's own entries, <prefix>reducer/<entry>, for a strategy that names its error
// feedback's entries itself; a reducer entry the load refuses is a UserError.
void saveReducerEntries(TensorMap& state, const reducers::Reducer& reducer, const std::string& prefix);
void loadReducerEntries(const TensorMap& state, reducers::Reducer& reducer, const std::string& prefix);
// The reducer's entries, which its loadState() asks for by name (Synchronizer::checksEntry).
bool isReducerEntry(const std::string& name, const std::string& prefix = "");

// The last step's norms as the exchange sampled them, and what the sends lost (the memories'
// norms; none for a lossless reducer, whose memory is always zero).
std::optional<SyncSample> sampleOf(const GradientExchange& exchange, const std::vector<at::Tensor>& memories,
                                   bool lossless, bool error_feedback);
LayerSample layerSampleOf(const GradientExchange& exchange, const std::vector<at::Tensor>& memories, bool lossless,
                          std::vector<reducers::Reducer::TensorCost> costs);

}  // namespace gcrun::experiments
