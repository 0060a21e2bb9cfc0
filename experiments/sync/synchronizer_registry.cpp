#include "experiments/sync/synchronizer.h"

namespace gcrun::experiments {

// Each strategy's factory, defined in its own file.
std::unique_ptr<Synchronizer> makeEveryStep(const SyncContext& context);
SynchronizerSpec localSgdSpec();
SynchronizerSpec dilocoSpec();
SynchronizerSpec streamingDilocoSpec();
SynchronizerSpec sparseLocoSpec();
SynchronizerSpec demoSpec();

double parameterCopies(double copies, const tasks::ModelSize& model) {
  return copies * model.parameterCount() * sizeof(float);
}

Registry<SynchronizerSpec>& synchronizerRegistry() {
  static Registry<SynchronizerSpec>* registry = [] {
    auto* r = new Registry<SynchronizerSpec>("sync strategy");
    r->add("every-step", "each step's gradient through the reducer, with error feedback (the reference's)",
           {makeEveryStep,
            {},
            false,
            {},
            {},
            [](const ExperimentConfig&) { return everyStepSchedule(); },
            // Each gradient through the reducer as backward makes it (gradient hooks).
            [](const ExperimentConfig&) { return SyncPlan{}; }});
    r->add("local-sgd",
           "each worker steps alone; parameters averaged every sync.every steps after sync.warmup_steps of "
           "every-step (PyTorch's post-local SGD)",
           localSgdSpec());
    r->add("diloco",
           "sync.every inner steps alone, then the pseudo-gradient through the reducer and an outer Nesterov SGD "
           "on the global model (DiLoCo)",
           dilocoSpec());
    r->add("streaming-diloco",
           "diloco syncing sync.fragments fragments of the model in turn, each result applied sync.delay steps "
           "after its send and mixed with the local fragment (Streaming DiLoCo)",
           streamingDilocoSpec());
    r->add("sparseloco",
           "diloco with an error-feedback accumulator for outer momentum, sent as its chunk-wise 2-bit top-k "
           "(SparseLoCo)",
           sparseLocoSpec());
    r->add("demo",
           "each step's local momentum sent as its top DCT coefficients; the sgd optimizer steps along the sign of "
           "their average (DeMo)",
           demoSpec());
    return r;
  }();
  return *registry;
}

}  // namespace gcrun::experiments
