#include "experiments/sync/synchronizer.h"

namespace gcrun::experiments {

// Each strategy's factory, defined in its own file.
std::unique_ptr<Synchronizer> makeEveryStep(const SyncContext& context);

Registry<SynchronizerFactory>& synchronizerRegistry() {
  static Registry<SynchronizerFactory>* registry = [] {
    auto* r = new Registry<SynchronizerFactory>("sync strategy");
    r->add("every-step", "each step's gradient through the reducer, with error feedback (the reference's)",
           makeEveryStep);
    return r;
  }();
  return *registry;
}

}  // namespace gcrun::experiments
