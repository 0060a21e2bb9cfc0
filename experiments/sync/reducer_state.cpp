#include "experiments/sync/reducer_state.h"

#include <stdexcept>

#include <torch/torch.h>

#include "experiments/sync/tensor_norms.h"
#include "hyperparams/base/errors.h"

namespace gcrun::experiments {
namespace {

const std::string kReducerPrefix = "reducer/";

}  // namespace

void saveReducerState(TensorMap& state, const std::vector<std::string>& names, const std::vector<at::Tensor>& memories,
                      const reducers::Reducer& reducer, const std::string& prefix) {
  for (size_t i = 0; i < names.size(); ++i) state[prefix + "memory/" + names[i]] = memories[i];
  saveReducerEntries(state, reducer, prefix);
}

void saveReducerEntries(TensorMap& state, const reducers::Reducer& reducer, const std::string& prefix) {
  reducers::Reducer::State reducer_state;
  reducer.saveState(reducer_state);
  for (const auto& kv : reducer_state) state[prefix + kReducerPrefix + kv.first] = kv.second;
}

void loadReducerState(const TensorMap& state, const std::vector<std::string>& names,
                      const std::vector<at::Tensor>& memories, reducers::Reducer& reducer, const std::string& prefix) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < names.size(); ++i) memories[i].detach().copy_(state.at(prefix + "memory/" + names[i]));
  loadReducerEntries(state, reducer, prefix);
}

void loadReducerEntries(const TensorMap& state, reducers::Reducer& reducer, const std::string& prefix) {
  reducers::Reducer::State reducer_state;
  const size_t skipped = prefix.size() + kReducerPrefix.size();
  for (const auto& kv : state) {
    if (isReducerEntry(kv.first, prefix)) reducer_state[kv.first.substr(skipped)] = kv.second;
  }
  try {
    reducer.loadState(reducer_state);
  } catch (const std::invalid_argument& e) {
    throw UserError(std::string("checkpoint: ") + e.what());
  }
}

bool isReducerEntry(const std::string& name, const std::string& prefix) {
  return name.rfind(prefix + kReducerPrefix, 0) == 0;
}

std::optional<SyncSample> sampleOf(const GradientExchange& exchange, const std::vector<at::Tensor>& memories,
                                   bool lossless, bool error_feedback) {
  const auto& norms = exchange.sampledNorms();
  if (!norms) return std::nullopt;
  SyncSample sample{norms->gradient, norms->send, std::nullopt, error_feedback};
  if (!lossless) sample.lost = globalNorm(memories);
  return sample;
}

LayerSample layerSampleOf(const GradientExchange& exchange, const std::vector<at::Tensor>& memories, bool lossless,
                          std::vector<reducers::Reducer::TensorCost> costs) {
  auto norms = exchange.sampledLayerNorms();
  std::vector<double> lost(memories.size(), 0.0);
  if (!lossless) {
    std::vector<at::Tensor> memory_norms;
    for (const auto& m : memories) memory_norms.push_back(m.norm());
    lost = doublesOf(memory_norms);
  }
  return {std::move(norms.gradient), std::move(norms.send), std::move(lost), std::move(costs)};
}

}  // namespace gcrun::experiments
