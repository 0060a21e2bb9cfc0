#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "experiments/sync/gradient_exchange.h"
#include "hyperparams/base/registry.h"
#include "hyperparams/base/sync_schedule.h"
#include "hyperparams/base/tensor_map.h"
#include "hyperparams/config.h"
#include "hyperparams/settings.h"
#include "reducers/comm/communicator.h"
#include "reducers/reducer.h"
#include "tasks/model_size.h"

namespace gcrun::experiments {

// Makes a reducer of the resolved experiment's kind (reducer.name, its settings, the run's seed,
// reducer.granularity) for `parameters`, as the worker made SyncContext::reducer for the model.
using ReducerMaker = std::function<std::unique_ptr<reducers::Reducer>(std::vector<reducers::ParameterInfo> parameters)>;
// The same over another communicator of the worker's (Communicator::sibling).
using ReducerOverMaker = std::function<std::unique_ptr<reducers::Reducer>(
    comm::Communicator& comm, std::vector<reducers::ParameterInfo> parameters)>;

// What a strategy works with, built once by the trainer; every reference outlives the synchronizer.
struct SyncContext {
  const ExperimentConfig& config;
  comm::Communicator& comm;
  reducers::Reducer& reducer;
  bool lossless_reducer;  // the reducer's spec says it delivers the exact average
  double clip_norm;       // the task's local gradient clip norm; 0: none
  const std::vector<at::Tensor>& params;
  const std::vector<std::string>& names;  // the parameters', in order
  // Each parameter's .grad (buffers.gradients), zeroed, which the optimizer steps along, and a
  // memory per parameter for the strategy's error feedback.
  GradientBuffers& buffers;
  // Optimizer::beforeSend on parameter i's final gradient (the reference SGD's weight decay and
  // momentum when the config puts them before the reduce); a strategy that sends gradients calls it
  // before making a send.
  std::function<void(size_t)> before_send;
  // For a strategy that reduces parts of the model through reducers of their own.
  ReducerMaker make_reducer;
  // For a strategy that reduces on a thread of its own, over a second group (comm.sibling()).
  // Empty: none; such a strategy then reduces on `comm`, blocking.
  ReducerOverMaker make_reducer_over = {};
};

// How a strategy that sends through the trainer's reducer (every-step's gradients, diloco's and
// streaming-diloco's pseudo-gradients) exchanges: with error feedback as optimizer.memory says, the
// task's clip, and in place when the reducer is lossless.
inline GradientExchange::Options reducerExchangeOptions(const SyncContext& context) {
  return {context.config.optimizer.memory, context.clip_norm, context.lossless_reducer};
}

// A sampled step's norms on this worker, over all parameters (powersgd.md 1.4).
struct SyncSample {
  double gradient = 0;  // ||the local gradient||
  double send = 0;      // ||what this worker sent||
  // ||what the send lost|| (the error-feedback memory after the sync); none when nothing is lost.
  std::optional<double> lost;
  bool error_feedback = false;  // what was lost is sent again next time (memory_norm is logged)
};

// The same per parameter, in parameter order (layers.csv); `lost` is zero where nothing is lost.
struct LayerSample {
  std::vector<double> gradient, send, lost;
  std::vector<reducers::Reducer::TensorCost> costs;  // the reducer's, empty when it does not say
};

// What the last step's sync of the workers' models did. Strategies that sync models every H steps
// report it on the steps they sync; every-step, whose gradient exchange is the step itself, never does;
// demo, which sends a payload of its own every step, reports every step.
struct SyncEvent {
  uint64_t bits = 0;  // what this worker sent for it: all its step sent
  // The replicas' distance from their mean just before the sync, relative to the mean's norm
  // (replicaDrift, replicas.h); none where not measured (sync.drift: false).
  std::optional<double> replica_drift;
};

// What keeps the workers' models in agreement: a strategy (every step's gradient through the
// reducer, or models averaged every H steps, or an outer optimizer on pseudo-gradients) that the
// trainer calls at fixed points of each step, in lockstep on every worker:
//   beforeBackward -> forward and backward -> afterBackward -> the optimizer -> afterStep.
// A strategy may start its sends during backward (hooks on the parameters). Its state (error
// feedback, a global copy, outer momentum) goes into the worker's checkpoint under entry names of
// its own, and coming back from one it continues as the saved run would have.
class Synchronizer {
 public:
  virtual ~Synchronizer() = default;

  // Before the step's backward; with `sample`, the step's norms are recorded (sample()).
  virtual void beforeBackward(bool sample) = 0;
  // After backward: the gradients become what the optimizer steps along. Returns the bits this
  // worker sent. Throws NonFiniteGradient (gradient_exchange.h) naming a parameter whose gradient
  // stopped being finite.
  virtual uint64_t afterBackward() = 0;
  // After the optimizer applied step `step` (1-based): strategies that sync parameters do it here.
  // Returns the bits this worker sent.
  virtual uint64_t afterStep(int64_t step) = 0;

  // Around an epoch's evaluation: a strategy whose global model differs from the worker's own
  // swaps it in before, and back after.
  virtual void beforeEvaluation() = 0;
  virtual void afterEvaluation() = 0;

  // The last step's sync of models, if it made one (read after afterStep()).
  virtual std::optional<SyncEvent> lastSync() const = 0;

  // The last step's norms, if it was sampled; measured when asked, after the step.
  virtual std::optional<SyncSample> sample() const = 0;
  virtual LayerSample layerSample() const = 0;

  // Adds its checkpoint entries to `state`, of the dtype and shape a restore expects.
  virtual void saveState(TensorMap& state) const = 0;
  // Whether a checkpoint may hold or lack entry `name`, which loadState() then checks itself
  // (state that grows as the run goes, like a reducer's); the other entries saveState() writes
  // are checked for presence, dtype and shape before loadState() is called.
  virtual bool checksEntry(const std::string& name) const = 0;
  // Whether its checkpoint entry `name` holds the same on every rank (a global model, its outer
  // momentum and steps): a resume checks that the ranks' checkpoints agree on it. By default none.
  virtual bool sharedEntry(const std::string& /*name*/) const { return false; }
  // Copies its entries back from a checkpoint's `state` (the whole checkpoint: its counter/step,
  // savedStep(), bounds whatever the strategy counted); a bad one it checks itself is a UserError.
  virtual void loadState(const TensorMap& state) = 0;
};

using SynchronizerFactory = std::function<std::unique_ptr<Synchronizer>(const SyncContext&)>;

// What a strategy sends at its schedule's sends, as `gcrun plan` models it without a model: the
// strategy's own account, so that the plan's messages are the ones its code makes.
struct SyncPlan {
  // How a send travels: the tensors through the trainer's reducer (its bits, its collective), or
  // the parameters averaged exactly in float32 (averageParameters, one all-reduce of them all).
  enum class Exchange { reducer, parameter_average };
  Exchange exchange = Exchange::reducer;
  // For a strategy that exchanges every step: whether a tensor's message can leave as soon as
  // backward has made its gradient (hooks during backward), or only once backward is done.
  bool during_backward = true;
  // For a periodic one: the parameter indices each fragment holds, from the parameters' names in
  // order (the strategy's own assignment); empty: one fragment, the whole model.
  std::function<std::vector<std::vector<size_t>>(const std::vector<std::string>& names, int64_t fragments)> fragments =
      {};
};

// How a strategy is registered: its factory and what gcrun must know about it without building one.
struct SynchronizerSpec {
  SynchronizerFactory make;
  // The settings it reads, keys sync.<name> (`--set`, `gcrun show`, `gcrun list keys`); it reads
  // their values from config.sync.settings with its SettingsSchema, as reducers do theirs.
  std::vector<hyperparams::SettingSpec> settings;
  // The workers' models differ between syncs: simulated workers then keep a copy each instead of
  // sharing one (experiments/worker/simulated_workers.h).
  bool local_replicas = false;
  // Refuses, with a UserError of one line naming the key and what it accepts, a configuration the
  // strategy cannot run (a reducer that cannot carry its payload, an optimizer it needs another
  // of); called once, when the experiment is resolved. Empty: every configuration.
  std::function<void(const ExperimentConfig&)> validate;
  // The bytes one worker's strategy holds besides the model, its gradient and error-feedback
  // buffers and the optimizer's state (a global copy, outer momentum, DCT matrices), for a model of
  // that size: the memory check before a run, so it must not allocate. Empty: nothing more.
  std::function<double(const ExperimentConfig&, const tasks::ModelSize&)> memory = {};
  // When it sends, what and when that is applied, from its settings: rank 0 records it in run.json
  // ("schedule") and `gcrun predict` models the run's time per step from it. Empty: it declares
  // none, and predict knows a run of it only if it is one of the built-ins of old (by its name).
  std::function<SyncSchedule(const ExperimentConfig&)> schedule = {};
  // What its sends hold and how they travel (SyncPlan), for `gcrun plan`, which needs its schedule
  // too. Empty: a plan refuses the strategy.
  std::function<SyncPlan(const ExperimentConfig&)> plan = {};
};

// What several strategies hold: `copies` parameter-sized float tensors of a model of that size.
double parameterCopies(double copies, const tasks::ModelSize& model);

// The strategies, by sync.strategy; the built-ins are registered on first use. A strategy is one
// file in experiments/sync/ and its entry in synchronizer_registry.cpp.
Registry<SynchronizerSpec>& synchronizerRegistry();

}  // namespace gcrun::experiments
