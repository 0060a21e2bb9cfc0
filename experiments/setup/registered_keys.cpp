#include "experiments/setup/registered_keys.h"

#include "experiments/sync/synchronizer.h"
#include "outputs/metric_sink.h"
#include "reducers/reducer.h"
#include "tasks/task.h"

namespace gcrun::experiments {
namespace {

template <class Spec>
std::vector<hyperparams::SettingOwner> ownersOf(const Registry<Spec>& registry) {
  std::vector<hyperparams::SettingOwner> owners;
  for (const auto* entry : registry.inOrderAdded()) owners.push_back({entry->name, entry->factory.settings});
  return owners;
}

}  // namespace

hyperparams::ConfigKeys configKeys() {
  hyperparams::Extensions extensions;
  extensions.reducers = ownersOf(reducers::reducerRegistry());
  extensions.tasks = ownersOf(tasks::taskRegistry());
  extensions.sinks = ownersOf(outputs::sinkRegistry());
  extensions.strategies = ownersOf(synchronizerRegistry());
  for (const auto* entry : reducers::reducerRegistry().inOrderAdded()) {
    const auto& reference_name = entry->factory.reference_name;
    if (!reference_name.empty()) extensions.reducer_reference_names[reference_name] = entry->name;
  }
  return hyperparams::ConfigKeys(extensions);
}

}  // namespace gcrun::experiments
